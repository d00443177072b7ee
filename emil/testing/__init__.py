"""Shipped doubles for tests and the demo. Nothing here is a model or a real vLLM.

- ``emil.testing.vllm_double``  a vLLM-dialect HTTP server DOUBLE (real HTTP on 127.0.0.1):
  the server and its fault injection; ``vllm_dialect`` what each endpoint answers;
  ``vllm_answer`` how one completion is answered (decode steps, simulated metrics)
- ``emil.testing.vllm_wordings`` how each vLLM era words a context overflow
- ``emil.testing.script``       the scripted reply vocabulary (ScriptRequest -> Reply)
- ``emil.testing.brains``       SCRIPTED policies (NpcBrain...) and ScriptedLLM (in-process)
"""
