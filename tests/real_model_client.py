"""The OpenAI-compatible endpoint and the live event stream with a real model behind them.

Run by tests/real_model.sh with the base URL of `switchyard serve` on examples/unified-chat,
whose `llm` agents answer through llama-server. Checks the mechanics only: the answer is the
output's `response_text`, streamed deltas join to it, usage is counted, the SSE stream ends
with `final`. Each check prints one line; any failure raises.
"""

import json
import sys
import urllib.request

import openai

base = sys.argv[1]
USER = "real-model-test"
HEADERS = {"x-switchyard-user": USER, "content-type": "application/json"}
QUESTION = [{"role": "user", "content": "How many vacation days can I carry over?"}]


def client():
    return openai.OpenAI(base_url=base + "/v1", api_key=f"dev:{USER}", max_retries=0, timeout=300)


def call(method, path, body=None, extra=None, timeout=300):
    req = urllib.request.Request(base + path, data=body, method=method, headers={**HEADERS, **(extra or {})})
    return urllib.request.urlopen(req, timeout=timeout)


def output_of(query_id):
    with call("GET", f"/v1/queries/{query_id}?wait=20") as r:
        assert r.status == 200, r.status
        return json.load(r)


def answered(output):
    assert output["status"] in ("success", "partial"), (output["status"], output.get("caveats"))
    assert "transport error" not in json.dumps(output), output.get("caveats")


def check_usage(output, usage):
    """Usage is counted where the model answered: an agent whose answer broke its schema (the
    135M model's doing) leaves a template, which spends nothing."""
    assert usage is not None, "usage is reported"
    if any(r["status"] == "success" for r in output["agent_results"]):
        assert usage.prompt_tokens > 0, f"the model's usage is counted: {usage}"


r = client().chat.completions.create(model="unified-chat", messages=QUESTION)
ext = r.model_extra["switchyard"]
output = output_of(ext["query_id"])
answered(output)
assert r.choices[0].message.content == output["response_text"], (r.choices[0].message.content, output["response_text"])
check_usage(output, r.usage)
print(f"real_model: a buffered completion is the output's answer ({r.usage.prompt_tokens} prompt tokens)")

# Another question: an identical one may be answered from the answer cache, with no model call.
stream = client().chat.completions.create(
    model="unified-chat",
    messages=[{"role": "user", "content": "How many vacation days do new employees get?"}],
    stream=True, stream_options={"include_usage": True}
)
content, usage, query_id = [], None, None
for chunk in stream:
    query_id = chunk.id.removeprefix("chatcmpl-")
    usage = chunk.usage or usage
    if chunk.choices and chunk.choices[0].delta.content:
        content.append(chunk.choices[0].delta.content)
output = output_of(query_id)
answered(output)
assert "".join(content) == output["response_text"], ("".join(content), output["response_text"])
check_usage(output, usage)
print(f"real_model: a streamed completion's {len(content)} deltas join to the answer")

with call("POST", "/v1/queries", json.dumps({"query": "Can I carry over sick days?"}).encode()) as r:
    qid = json.load(r)["query_id"]
kinds, event = [], None
with call("GET", f"/v1/queries/{qid}/events", extra={"accept": "text/event-stream"}) as events:
    for raw in events:
        line = raw.decode().rstrip("\n")
        if line.startswith("event: "):
            event = line[7:]
            kinds.append(event)
        if event == "final" and line == "":
            break
assert kinds and kinds[-1] == "final", kinds[-5:]
assert "token" in kinds, f"the answer streamed live: {sorted(set(kinds))}"
answered(output_of(qid))
print(f"real_model: the live event stream carried {kinds.count('token')} token events and ended with final")
