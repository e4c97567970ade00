"""Getting work to agents: forwarding to endpoint agents, inbox deliveries, push notifications;
and telling people about escalations (notify)."""
