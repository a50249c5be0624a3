"""Switchyard's OpenAI-compatible endpoint, driven by the official `openai` package.

Run by tests/openai_client.sh with three `switchyard serve` base URLs: the embedded default
manifest, tests/fixtures/manifests/chat-live.yaml (one agent streams the answer alone) and
examples/unified-chat (a critic may reject a draft). Each check prints one line; any failure
raises.
"""

import json
import sys
import time
import urllib.request

import openai

default_base, live_base, critic_base = sys.argv[1:4]
USER = "openai-client-test"


def client(base, user=USER):
    # The API key names the dev caller: `switchyard serve` reads `Bearer dev:<user>`.
    return openai.OpenAI(base_url=base + "/v1", api_key=f"dev:{user}", max_retries=0, timeout=30)


def query_status(base, query_id, user=USER):
    req = urllib.request.Request(f"{base}/v1/queries/{query_id}", headers={"x-switchyard-user": user})
    with urllib.request.urlopen(req, timeout=10) as r:
        return r.status, json.load(r)


def output_of(base, query_id, user=USER):
    req = urllib.request.Request(f"{base}/v1/queries/{query_id}?wait=10", headers={"x-switchyard-user": user})
    with urllib.request.urlopen(req, timeout=20) as r:
        assert r.status == 200, r.status
        return json.load(r)


passed = 0


def check(name):
    def wrap(fn):
        global passed
        fn()
        passed += 1
        print(f"openai: {name}: ok")
        return fn

    return wrap


@check("models.list names the manifest")
def _():
    ids = [m.id for m in client(default_base).models.list().data]
    assert ids == ["e2i"], ids  # routing.yaml's `name`
    live = [m.id for m in client(live_base).models.list().data]
    assert live == ["chat-live"], live


def default_model():
    return client(default_base).models.list().data[0].id


@check("a non-streamed completion carries the answer, the query id and the citations")
def _():
    c = client(default_base)
    r = c.chat.completions.create(
        model=default_model(),
        messages=[{"role": "user", "content": "Which regions are underperforming against benchmark on market share?"}],
        temperature=0.3,
    )
    assert r.object == "chat.completion", r.object
    answer = r.choices[0].message.content
    assert r.choices[0].message.role == "assistant" and r.choices[0].finish_reason == "stop"
    ext = r.model_extra["switchyard"]
    assert r.id == "chatcmpl-" + ext["query_id"], (r.id, ext["query_id"])
    assert ext["citations"], "citations in the extension"
    assert ext["status"] == "success", ext["status"]
    assert ext["ignored_parameters"] == ["temperature"], ext["ignored_parameters"]
    output = output_of(default_base, ext["query_id"])
    assert answer == output["response_text"], (answer, output["response_text"])
    # The default manifest's agents are builtin: they call no model, so they spent no tokens.
    assert r.usage is not None and (r.usage.prompt_tokens, r.usage.completion_tokens, r.usage.total_tokens) == (0, 0, 0), r.usage


VACATION = [{"role": "user", "content": "How many vacation days can I carry over?"}]


def read_stream(stream, on_first_content=None):
    """Every chunk of a streamed completion: the content and reasoning deltas, the final chunk,
    usage and the query id; `on_first_content(seen)` runs when the first content arrives."""
    seen = {"content": [], "reasoning": [], "final": None, "usage": None, "query_id": None, "at_first": None}
    for chunk in stream:
        assert chunk.object == "chat.completion.chunk", chunk.object
        seen["query_id"] = chunk.id.removeprefix("chatcmpl-")
        if chunk.usage is not None:
            seen["usage"] = chunk.usage
        if not chunk.choices:
            continue
        delta = chunk.choices[0].delta
        reasoning = (delta.model_extra or {}).get("reasoning_content")
        if reasoning:
            seen["reasoning"].append(reasoning)
        if delta.content:
            if not seen["content"] and on_first_content:
                seen["at_first"] = on_first_content(seen)
            seen["content"].append(delta.content)
        if chunk.choices[0].finish_reason is not None:
            seen["final"] = chunk
    return seen


@check("a streamed completion sends tokens while the query runs; the joined deltas are the answer")
def _():
    stream = client(live_base).chat.completions.create(
        model="chat-live", messages=VACATION, stream=True, stream_options={"include_usage": True}
    )
    seen = read_stream(stream, on_first_content=lambda seen: query_status(live_base, seen["query_id"])[0])
    content, final, usage, query_id = seen["content"], seen["final"], seen["usage"], seen["query_id"]
    assert seen["at_first"] == 202, f"the query had already ended at the first token ({seen['at_first']})"
    assert len(content) > 3, f"the answer came in {len(content)} pieces"
    assert final is not None and final.choices[0].finish_reason == "stop"
    ext = final.model_extra["switchyard"]
    assert ext["query_id"] == query_id and ext["citations"] and ext["revised"] is False, ext
    output = output_of(live_base, query_id)
    assert "".join(content) == output["response_text"], ("".join(content), output["response_text"])
    assert usage is not None and usage.completion_tokens > 0 and usage.prompt_tokens > 0, usage


@check("with a critic, drafts stream as reasoning_content and the content is the accepted answer")
def _():
    stream = client(critic_base).chat.completions.create(model="unified-chat", messages=VACATION, stream=True)
    seen = read_stream(stream, on_first_content=lambda seen: len(seen["reasoning"]))
    drafts = "".join(seen["reasoning"])
    assert seen["at_first"], "content came before any draft"
    assert "[policy_answerer, draft 1]" in drafts and "[policy_answerer, draft 2]" in drafts, drafts
    output = output_of(critic_base, seen["final"].model_extra["switchyard"]["query_id"])
    assert "".join(seen["content"]) == output["response_text"], ("".join(seen["content"]), output["response_text"])
    assert "§4.2" in output["response_text"]


@check("a follow-up sent as a second messages entry is routed with the first as context")
def _():
    c = client(default_base)
    model = default_model()
    first_q = "What is the market share of Kisqali in the Northeast?"
    first = c.chat.completions.create(model=model, messages=[{"role": "user", "content": first_q}])
    exchange = [
        {"role": "user", "content": first_q},
        {"role": "assistant", "content": first.choices[0].message.content},
    ]
    follow_up = {"role": "user", "content": "And for Fabhalta?"}
    second = c.chat.completions.create(model=model, messages=exchange + [follow_up])
    a, b = first.model_extra["switchyard"], second.model_extra["switchyard"]
    assert b["intent"] == a["intent"], (a["intent"], b["intent"])
    carried = {e["value"] for e in b["entities"] if e.get("source") == "context"}
    own = {e["value"] for e in b["entities"] if e.get("source") != "context"}
    assert "Fabhalta" in own and "Kisqali" not in own | carried, b["entities"]
    assert {"Northeast", "market_share"} <= carried, b["entities"]
    # Alone, the same words are not that question.
    alone = c.chat.completions.create(model=model, messages=[follow_up])
    assert not any(e.get("source") == "context" for e in alone.model_extra["switchyard"]["entities"])
    # A third turn continues the same session.
    answer = {"role": "assistant", "content": second.choices[0].message.content}
    third = c.chat.completions.create(
        model=model, messages=exchange + [follow_up, answer, {"role": "user", "content": "What about the Midwest?"}]
    )
    t = third.model_extra["switchyard"]
    assert t["session_id"] == b["session_id"], (t["session_id"], b["session_id"])
    assert t["intent"] == a["intent"], t["intent"]


@check("bad requests are 400s in the OpenAI error shape naming the field")
def _():
    c = client(default_base)
    model = default_model()
    cases = [
        ({"messages": [{"role": "wizard", "content": "hi"}]}, "messages[0].role"),
        ({"messages": [{"role": "user", "content": ""}]}, "messages[0].content"),
        ({"messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function", "function": {"name": "f"}}]}, "tools"),
        ({"messages": [{"role": "user", "content": "hi"}], "n": 2}, "n"),
        ({"messages": [{"role": "user", "content": "x" * 100_000}]}, "messages[0].content"),
    ]
    for kwargs, param in cases:
        try:
            c.chat.completions.create(model=model, **kwargs)
        except openai.BadRequestError as e:
            assert e.status_code == 400, e.status_code
            assert e.param == param, (e.param, param)
            assert e.code == "invalid_input", e.code
            assert param in e.message, e.message
        else:
            raise AssertionError(f"{param}: accepted")
    try:
        c.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
    except openai.BadRequestError as e:
        assert e.param == "model", e.param
    else:
        raise AssertionError("an unknown model was accepted")
    nobody = openai.OpenAI(base_url=default_base + "/v1", api_key="sk-not-a-dev-user", max_retries=0)
    try:
        nobody.chat.completions.create(model=model, messages=[{"role": "user", "content": "hi"}])
    except openai.AuthenticationError as e:
        assert e.status_code == 401 and e.code == "unauthenticated", (e.status_code, e.code)
    else:
        raise AssertionError("a caller without identity was answered")


@check("another caller cannot continue a session by its id")
def _():
    model = default_model()
    mine = client(default_base).chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": "What is the market share of Kisqali in the Northeast?"}],
        extra_body={"session_id": "shared-name"},
    )
    theirs = client(default_base, user="someone-else").chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": "And for Fabhalta?"}],
        extra_body={"session_id": "shared-name"},
    )
    assert mine.model_extra["switchyard"]["session_id"] == "shared-name"
    ents = theirs.model_extra["switchyard"]["entities"]
    assert not any(e.get("source") == "context" for e in ents), f"another caller's history leaked: {ents}"


print(f"openai: {passed} passed, 0 failed")
