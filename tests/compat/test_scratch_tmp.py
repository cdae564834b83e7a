from llama_stack_client import LlamaStackClient
from ferryman.testing import ScriptedReply, ScriptedToolCall
from support import WEATHER_TOOL

def test_explore(base_url, model):
    c = LlamaStackClient(base_url=base_url)
    a = c.agents.create(agent_config={"model": "scripted-model", "instructions": "x", "client_tools": [WEATHER_TOOL]})
    print(a)
    s = c.agents.session.create(agent_id=a.agent_id, session_name="s")
    print(s)
    model.enqueue_tool_call("get_weather", {"city": "Paris"})
    chunks = list(c.agents.turn.create(agent_id=a.agent_id, session_id=s.session_id, messages=[{"role": "user", "content": "hi"}], stream=True))
    for ch in chunks:
        print(repr(ch)[:400])
    t = chunks[-1].event.payload.turn
    call = t.output_message.tool_calls[0]
    model.enqueue_text("sunny in Paris")
    r = c.agents.turn.resume(agent_id=a.agent_id, session_id=s.session_id, turn_id=t.turn_id, tool_responses=[{"call_id": call.call_id, "tool_name": "get_weather", "content": "sunny"}], stream=False)
    print(repr(r))
    sess = c.agents.session.retrieve(agent_id=a.agent_id, session_id=s.session_id, turn_ids=[t.turn_id])
    print(repr(sess))
    print(model.requests()[-1]["messages"])
    model.enqueue_error(500); model.enqueue_error(500); model.enqueue_error(500)
    chunks = list(c.agents.turn.create(agent_id=a.agent_id, session_id=s.session_id, messages=[{"role": "user", "content": "hi"}], stream=True))
    for ch in chunks:
        print(repr(ch)[:400], hasattr(ch, "error"))
    print(type(chunks[-1].error))
    print(c.tools.list(toolgroup_id="builtin::math"))
    assert 0
