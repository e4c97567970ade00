"""The demo cast: agents that play the seeds' scenarios through a running hub, for `./hub run`.

- `cast`: who the agents are (cards, roles, skills), the demo policy and the scenarios' words;
- `launch`: registers the cast at the hub, publishes the demo policy, starts the two processes
  (Django side; everything else here speaks to the hub over A2A only, like any agent);
- `endpoints`: one process serving every endpoint agent, each a real a2a-sdk server on its own
  loopback port;
- `inboxes`: one process running the inbox agents and the director, which starts scenarios;
- `common`: what both processes share (their configuration, the log line, the hub client).

`python -m a2a_core.demo endpoints|inboxes` runs one process; `launch` starts both.
"""
