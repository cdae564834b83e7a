"""Benchmark harness of ferryman (issue #3).

``python -m bench`` starts an inference stub and a ferryman server on loopback,
drives them with a load generator running in its own process
(``python -m bench.loadgen``), and reports every figure as the median of
repeated runs with its spread, as a table on stdout and as JSON.

Modules, one concept each:

* :mod:`bench.modes` -- the sizes of a smoke, quick and full run.
* :mod:`bench.procs` -- starting, health-polling, measuring and stopping servers.
* :mod:`bench.replicas` -- the ferryman servers under test: one, or N replicas on their own ports.
* :mod:`bench.stub` -- the inference stub: ferryman's scripted server app,
  routed by message content so that concurrent turns get deterministic replies.
* :mod:`bench.scenarios` -- what one operation of each workload sends and checks.
* :mod:`bench.loadgen` -- the closed-loop async load generator (JSON in, JSON out).
* :mod:`bench.stats` -- percentiles and median-of-runs summaries.
* :mod:`bench.suite` -- the phases of a run and the figures they produce.
* :mod:`bench.profiling` -- optional py-spy sampling of the server under load.
* :mod:`bench.report` -- the table and the JSON file.
"""
