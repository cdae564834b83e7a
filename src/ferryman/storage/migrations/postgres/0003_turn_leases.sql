-- Running turns hold a lease that the replica running them renews; any replica
-- fails a running turn whose lease ended.
ALTER TABLE turns ADD COLUMN lease_until TIMESTAMPTZ;
CREATE INDEX running_turn_leases ON turns(lease_until) WHERE status = 'in_progress';
