"""Reads a gzipped pprof profile with the Python code protoc generated from profile.proto (its
directory is the first argument) and prints it as folded stacks, as `trace-cli flamegraph
--folded` does: `process;root;...;leaf value` per stack, the value the default sample type's;
then, for each Python frame, `line FUNCTION FILE LINE`."""
import collections
import gzip
import sys

sys.path.insert(0, sys.argv[1])
import profile_pb2  # noqa: E402

p = profile_pb2.Profile()
with gzip.open(sys.argv[2], "rb") as f:
    p.ParseFromString(f.read())
s = p.string_table
which = [i for i, t in enumerate(p.sample_type) if t.type == p.default_sample_type][0]
locations = {l.id: l for l in p.location}
functions = {f.id: f for f in p.function}
folded = collections.Counter()
lines = set()
for sample in p.sample:
    labels = {s[l.key]: l for l in sample.label}
    frames = []
    for lid in reversed(sample.location_id):
        line = locations[lid].line[0]
        fn = functions[line.function_id]
        frames.append(s[fn.name])
        if line.line:
            lines.add((s[fn.name], s[fn.filename], line.line))
    folded[";".join([s[labels["process"].str]] + frames)] += sample.value[which]
for stack, n in sorted(folded.items()):
    print(f"{stack} {n}")
for name, file, line in sorted(lines):
    print(f"line {name}\t{file}\t{line}")
