"""Shipped doubles and rigs for tests, benchmarks and the demo. Nothing here is a model.

- ``vllm_double``     a vLLM-dialect HTTP server DOUBLE (real HTTP on 127.0.0.1): the server and
  its fault injection; ``vllm_dialect`` what each endpoint answers; ``vllm_answer`` how one
  completion is answered (decode steps, simulated metrics); ``vllm_wordings`` how each vLLM era
  words a context overflow; ``faults`` the fault modes; ``subprocess_double`` the double in
  its own process; ``sdk_stream`` an SDK-shaped stream for the client's benchmark
- ``script``          the scripted reply vocabulary (ScriptRequest -> Reply)
- ``brains``          SCRIPTED policies (NpcBrain, DemoBrain...) and ScriptedLLM (in-process)
- ``reducer``         the summariser double: a generic extractive text reducer
- ``chaos``, ``chaos_scenarios``, ``soak``  the chaos rig and the soak run on the doubles (the
  soak also against a real vLLM on this CPU)
- ``scaleout``        one run of vLLM replicas on this CPU behind vllm-router, Emils in their own
  processes and chatting players: the scale-out test and the router benchmark (real services,
  no double); ``replicas`` the servers, ``fleet`` the Emils and the players
- ``processes``       child processes of a test run: a group each, none outliving the run

Only the demo, the tool scripts and the tests use them (tests/unit/test_house.py).
"""
