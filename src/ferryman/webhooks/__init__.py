"""Webhooks: a run's end posted to the URL its request named, signed, from a durable outbox."""
