#!/bin/sh
# tests/support/tools/check-trace.sh TUTTI_RUN STREAM_CHECK -- TUTTI_TRACE writes a valid Chrome trace:
# two ranks share one file (pid = rank), every collective and point-to-point group each rank
# ran is there once with its sequence number (each kind counted apart), phases of the schedule sit on lane tracks, the
# stream worker has a named track; %r in the name gives one file per rank; a second run
# replaces, not appends to, the first one's events.
set -eu
run=$1 check=$2
dir=$(mktemp -d /tmp/tutti-trace-XXXXXX)
trap 'rm -rf "$dir"' EXIT

validate() { # FILE RANKS...
    python3 - "$@" <<'PY'
import json, sys
path, ranks = sys.argv[1], [int(r) for r in sys.argv[2:]]
text = open(path).read().rstrip()
assert text.startswith("["), "the file does not open a JSON array"
events = json.loads(text.rstrip(",") + "]")
for r in ranks:
    mine = [e for e in events if e.get("pid") == r]
    # stream_check order: 24 all-reduces and 24 groups, each numbered 1..24 once (collectives
    # and point-to-point batches count apart: a batch among some ranks is no collective of all)
    for cat in ("coll", "p2p"):
        seqs = sorted(e["args"]["seq"] for e in mine if e.get("cat") == cat)
        assert seqs == list(range(1, 25)), f"rank {r}: {cat} sequence numbers {seqs[:5]}... ({len(seqs)})"
    steps = [e for e in mine if e.get("cat") == "step"]
    assert steps and all(e["dur"] >= 0 and e["tid"] > 100 for e in steps), f"rank {r}: steps"
    names = {e["args"]["name"] for e in mine if e.get("name") == "thread_name"}
    assert "stream 1" in names, f"rank {r}: thread names {names}"
    assert any(e.get("name") == "process_name" for e in mine), f"rank {r}: no process name"
others = {e.get("pid") for e in events} - set(ranks)
assert not others, f"events of unexpected pids {others}"
print(f"{path}: {len(events)} events, ranks {ranks}: ok")
PY
}

TUTTI_TRACE="$dir/t.json" "$run" -n 2 "$check" order >/dev/null
validate "$dir/t.json" 0 1
TUTTI_TRACE="$dir/t.json" "$run" -n 2 "$check" order >/dev/null
validate "$dir/t.json" 0 1
TUTTI_TRACE="$dir/r%r.json" "$run" -n 2 "$check" order >/dev/null
validate "$dir/r0.json" 0
validate "$dir/r1.json" 1
echo "trace: ok"
