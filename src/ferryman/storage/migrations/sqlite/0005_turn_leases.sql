-- Running turns hold a lease (epoch seconds) that the replica running them renews;
-- any replica fails a running turn whose lease ended.
ALTER TABLE turns ADD COLUMN lease_until REAL;
CREATE INDEX running_turn_leases ON turns(lease_until) WHERE status = 'in_progress';
