"""Generated cases for the differential tests against orkoracle (Orkestra's note library
with Go text/template and its resolver, ../shared/tools/orkoracle).

`build_data()` is the custom resource both sides read; `generate(seed, per_function)`
draws templates: every function the oracle lists, called with arguments of every type a
custom resource carries (strings with unicode, ints, floats, nil, maps, lists, missing
keys, literals, results of other notes), and every action. `compare()` decides whether
two results agree, with the comparisons that are not plain equality (random values by
shape, clock-dependent values within a tolerance) and the documented allow-list.
"""

from __future__ import annotations

import contextlib
import random
import re
from collections.abc import Callable
from datetime import datetime
from typing import Any

STRINGS = [
    "", " ", "abc", "Hello World", "  padded  ", "héllo wörld", "日本語", "ß", "Ωmega",
    "😀x",
    "a,b,,c", " a , b ", "a.b.c", "x-y_z", "fooBarBaz", "HTTPServer", "MyAPIKey",
    "true", "false", "yes", "off", "1", "0", "-3", "42", "3.5", "1e3", "0x1f", "1_000", "NaN",
    "inf", "1e400", " 7", "<no value>", "%d", "{{", "a\tb", "line\nbreak",
    "user@example.com", " user@example.com ", "John <j@x.io>", "a..b@c.d", "@x.io", "a@b",
    "https://example.com/path?q=1", "http://host:8080", "ftp://x.io", "http://",
    "https://ex ample.com",
    "http://[::1]:80/", "http://a%zz.com", "/rel/path", "https://www.example.com/",
    "git@github.com:org/repo.git", "ssh://git@host/repo", "nginx", "nginx:1.25",
    "registry.io:5000/team/app:v1.2", "Nginx:latest", "app@sha256:" + "a" * 64,
    "{\"a\": 1}", "[1, 2, 3]", "[1, \"x\", null]", "{bad json}", "null", "- a\n- b", "k: v\nn: 2",
    "80", "65535", "65536", "+443", "0080",
    "app.kubernetes.io/name", "example.com/", "/x", "a/b/c", "Valid-Label_1.x", "-bad",
    "a" * 63, "a" * 64, "my.domain.com", "UPPER.com", "10.0.0.1", "192.168.1.300",
    "172.20.1.1", "8.8.8.8", "::1", "fd00::1", "::ffff:10.1.2.3", "010.1.1.1",
    "10.0.0.0/8", "192.168.0.0/16", "2001:db8::/32", "10.0.0.1/33", "1.2.3.4/024",
    "100m", "1Gi", "512Mi", "1.5Gi", "2", "0.5", "1e3", "1k", "10G", "-1Mi", "Gi", "1.2.3",
    "1.2.3", "v1.2.3", "1.2", "v2", "1.2.3-beta.1", "1.2.3+build.5", "01.2.3", "^1.2.0",
    ">= 1.0, < 2.0", "~1.2", "1.x", "*/5 * * * *", "0 * * * *", "30 2 * * *", "0 9 * * 1-5",
    "0 0 1 * *", "@daily", "@hourly", "@weekly", "bad cron", "* * * *", "5m", "1h30m", "2d",
    "1w", "3mo", "1y", "never", "-5s", "1.5h", "10", "", "2020-01-01T00:00:00Z",
    "2020-01-01", "2099-06-01T12:00:00Z", "2024-02-30T00:00:00Z", "2021-05-05T10:20:30.5+02:00",
    "2006-01-02 15:04", "Mon Jan 2", "15:04", "00:00", "23:59", "24:00", "9:05",
    "aGVsbG8=", "aGVsbG8", "aGV sbG8=", "////", "4pyT", "Zm9v\nYmFy",
    "major", "minor", "patch", "MINOR", "other", "Ready", "Available", "app", "tier",
    "cpu", "memory", "http", "main", "X", "*", "-",
    "ǅemo", "İstanbul", "ﬀ ligature", "ΣΑΣ", "ſ", "K-Kelvin",
    "!=1.2.3", ">1.2.3 || <1.0", "=1.2.3", "1.2.3 - 2.0.0", "~> 1.2", "^0.2.3", "<=1.2.3-rc.1",
    "Mon Jan _2 15:04:05 2006", "2006-01-02T15:04:05.000Z07:00", "3:04PM", "Z07:00 MST",
]

OBJECTS: dict[str, Any] = {
    "deploy": {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "team-a", "uid": "u-1",
                     "resourceVersion": "42", "creationTimestamp": "2020-01-01T00:00:00Z",
                     "generation": 3, "labels": {"app": "web", "tier": "front", "n": "7"},
                     "annotations": {"orkestra.orkspace.io/serve-target": "svc",
                                     "count": "12", "empty": ""},
                     "ownerReferences": [{"kind": "ReplicaSet", "name": "web-1"}]},
        "spec": {"replicas": 3,
                 "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
                 "template": {"spec": {"containers": [
                     {"name": "main", "image": "nginx:1.25",
                      "env": [{"name": "MODE", "value": "prod"}, {"name": "N", "value": 3}],
                      "ports": [{"name": "http", "containerPort": 80},
                                {"name": "metrics", "containerPort": 9090.0}]},
                     {"name": "side", "image": "busybox"}]}}},
        "status": {"readyReplicas": 2, "availableReplicas": 2, "updatedReplicas": 3,
                   "observedGeneration": 3, "phase": "Running",
                   "currentReplicaSet": "web-2",
                   "conditions": [{"type": "Available", "status": "True", "reason": "Min",
                                   "message": "ok"},
                                  {"type": "Ready", "status": "False", "reason": "Wait"}]},
        "_replicaSets": [{"metadata": {"name": "web-1"}}, {"metadata": {"name": "web-2"}}],
        "_owner": {"kind": "Deployment", "name": "web"},
        "_pods": [{"name": "web-0", "ip": "10.0.0.5", "phase": "Running", "node": "n1",
                   "ready": True, "restartCount": 1, "ordinal": 0, "exitCode": 0,
                   "containers": [{"name": "main", "state": "running", "reason": ""}]},
                  {"name": "web-1", "ip": "", "phase": "Failed", "node": "n2", "ready": False,
                   "restartCount": 5, "ordinal": 1, "exitCode": 2,
                   "containers": [{"name": "main", "state": "waiting",
                                   "reason": "CrashLoopBackOff"},
                                  {"name": "side", "reason": "OOMKilled"}]},
                  {"name": "job-x", "phase": "Succeeded", "ordinal": 2.0, "exitCode": -1}],
        "_warnings": [{"message": "Back-off restarting", "reason": "BackOff"},
                      {"message": "", "reason": "Failed"}],
        "_pvcs": [{}, {}],
    },
    "svc": {"kind": "Service", "metadata": {"name": "svc", "deletionTimestamp": "2020-01-01"},
            "spec": {"clusterIP": "10.96.0.1", "ports": [{"nodePort": 30080}],
                     "ingressClassName": "nginx", "storageClassName": "fast",
                     "accessModes": ["ReadWriteOnce", "", "ReadOnlyMany"],
                     "resources": {"requests": {"storage": "1Gi"}},
                     "rules": [{"host": "a.io"}, {"host": ""}, {"x": 1}],
                     "tls": [{"hosts": ["a.io", "b.io", "a.io"]}],
                     "taints": [{"key": "gpu"}, {"key": ""}],
                     "minReplicas": 0, "maxReplicas": 5},
            "status": {"loadBalancer": {"ingress": [{"ip": "1.2.3.4", "hostname": "lb.io"}]},
                       "phase": "Bound", "currentReplicas": 5, "desiredReplicas": 4,
                       "active": [{"name": "j1"}], "lastScheduleTime": "2020-01-01T00:00:00Z",
                       "succeeded": 1, "failed": "0",
                       "allocatable": {"cpu": "4", "memory": "8Gi"},
                       "conditions": [{"type": "Ready", "status": "True"}],
                       "subsets": [{"addresses": [{"ip": "10.0.0.9"}]}],
                       "currentRevision": "r1", "updateRevision": "r2"},
            "_pv": {"metadata": {"annotations": {"pv.kubernetes.io/provisioned-by": "csi"}},
                    "spec": {"volumeMode": "Filesystem"}}},
    "prom": {"result": "42.5",
             "raw": {"data": {"resultType": "vector", "result": [
                 {"metric": {"pod": "a"}, "value": [1, "3"]},
                 {"metric": {"pod": "b"}, "value": [1, "4.5"]},
                 {"metric": {}, "value": [1]}]}}},
    "scalar": {"raw": {"data": {"resultType": "scalar", "result": [1, "7"]}}},
    "cross": {"found": "false", "name": "db", "namespace": "x", "spec": {}, "status": {}},
    "placeholder": {"_placeholder": True},
    "empty": {},
    "cronmap": {"minute": "*/5", "hour": 3, "dayOfMonth": None, "month": " ", "dayOfWeek": "1"},
}

SCALARS: dict[str, Any] = {
    "i0": 0, "i1": 1, "i3": 3, "ineg": -2, "ibig": 9007199254740993, "i80": 80,
    "imax": 9223372036854775807, "f0": 0.0, "f15": 1.5, "f2": 2.0, "fneg": -2.5,
    "fmil": 1000000.0, "fsmall": 0.001, "fbig": 1e20, "huge": 123456789012345678901234567890,
    "tru": True, "fal": False, "nul": None,
}
LISTS: dict[str, Any] = {
    "l0": [], "lstr": ["a", "b", "c"], "lnum": [1, 2.5, 3], "lmix": ["a", 1, None, True, 2.0],
    "lnest": [{"a": 1}, [1, 2]], "lint3": [3, "3", 3.5],
}
MAPS: dict[str, Any] = {
    "m0": {}, "m1": {"a": 1, "b": "two", "c": None}, "mnest": {"x": {"y": {"z": "deep"}}},
    "mlabels": {"app": "web", "tier": "db"},
}


def build_data() -> dict[str, Any]:
    """The custom resource (before the API server's number handling)."""
    spec: dict[str, Any] = {}
    spec.update({f"s{i}": s for i, s in enumerate(STRINGS)})
    spec.update(SCALARS)
    spec.update(LISTS)
    spec.update(MAPS)
    spec["objs"] = OBJECTS
    return {"apiVersion": "test.orksync.io/v1", "kind": "Case",
            "metadata": {"name": "case", "namespace": "ns", "labels": {"app": "web"},
                         "annotations": {"a": "1"}, "generation": 2},
            "spec": spec, "status": {"phase": "Ready", "observedGeneration": 2}}


STRING_REFS = [f".spec.s{i}" for i in range(len(STRINGS))]
SCALAR_REFS = [f".spec.{k}" for k in SCALARS]
LIST_REFS = [f".spec.{k}" for k in LISTS]
MAP_REFS = [f".spec.{k}" for k in MAPS]
OBJECT_REFS = [f".spec.objs.{k}" for k in OBJECTS] + [".", ".spec", ".status", ".metadata"]
MISSING = [".spec.missing", ".spec.m1.zz", ".spec.objs.deploy.nope"]
LITERALS = ['"abc"', '""', '"日本"', '"a,b"', '"10.0.0.0/8"', '"1Gi"', '"1.2.3"', '"5m"',
            "0", "1", "3", "-1", "2.5", "1.0", "1e3", "true", "false", "nil", "'a'"]
NESTED = ['(toList "a, b,,c")', '(split "a-b" "-")', "(len .spec.s2)", "(mapKeys .spec.m1)",
          '(toInt "3")', "(add 1 2)", "(listGet .spec.lstr 0)", '(toFloat "2.5")',
          "(mapGet .spec.m1 \"c\")", "(asList .spec.s57)", "(asMap .spec.s59)",
          "(labels .spec.objs.deploy)", "(get .spec.objs.deploy \"spec\" \"replicas\")"]
TYPE_POOLS: dict[str, list[str]] = {
    "s": STRING_REFS * 3 + [f'"{s}"' for s in STRINGS if '"' not in s and "\\" not in s
                            and "\n" not in s and "\t" not in s] + SCALAR_REFS[:6],
    "i": ["0", "1", "2", "3", "5", "-1", "10", "(len .spec.s2)", "(len .spec.lstr)",
          ".spec.i3", "(listLen .spec.lnum)", "2.0"],
    "I": ["0", "1", "2", "-1", ".spec.i3", ".spec.i0", "(len .spec.s2)"],
    "f": ["1.5", "0.25", "2", "1024", ".spec.f15", ".spec.i3", "0.001", "3e9", "(toFloat \"2\")"],
    "b": ["true", "false", ".spec.tru", ".spec.fal", ".spec.i1"],
    "S": ['(toList "a,b")', '(split "x.y" ".")', "(mapKeys .spec.mlabels)", ".spec.lstr", "nil"],
}


def _strings(*texts: str) -> list[str]:
    """Each text as a literal and as the custom resource field holding it."""
    out = []
    for text in texts:
        out.append(f'"{text}"')
        if text in STRINGS:
            out.append(f".spec.s{STRINGS.index(text)}")
    return out


NUMBERS = [".spec.i3", ".spec.f15", ".spec.ineg", ".spec.fneg", ".spec.i0", ".spec.fmil",
           ".spec.imax", ".spec.huge", ".spec.fsmall", ".spec.f2", '"2"', '"2.5"', '" 7"',
           '"1e3"', '"abc"', '"-0"', '"0x10"', '"inf"', "1", "2.5", "0", "-3", "7", "1e3",
           "true", ".spec.tru", "(len .spec.s2)", '(toInt "3")', ".spec.nul"]
# Arguments that mean something to a family of notes (by name prefix), drawn most of the time
HINTS: dict[str, list[str]] = {
    **{n: NUMBERS for n in ("add", "sub", "mul", "div", "mod", "min", "max", "clamp", "abs",
                            "toInt", "toFloat", "toBool", "promAboveThreshold",
                            "promBelowThreshold")},
    "cron": [*_strings("*/5 * * * *", "0 * * * *", "30 2 * * *", "0 9 * * 1-5", "0 0 1 * *",
                       "@daily", "@hourly", "@weekly", "bad cron", "* * * *", "",
                       " @DAILY ", "1 2 3 4 5 6"),
             "0", "4", "5", "-1", ".spec.objs.cronmap", ".spec.m1"],
    "nextCron": _strings("*/5 * * * *", "@every 1h", "0 0 31 2 *", "bad", "@daily"),
    "parseQuantity": _strings("100m", "1Gi", "512Mi", "1.5Gi", "2", "0.5", "1e3", "1k",
                              "10G", "-1Mi", "Gi", "-", "1.2", "0.0000000001", "1Ei", "x"),
    "sumQuantity": _strings("100m", "1Gi", "512Mi", "1.5Gi", "2", "0.5", "1e3", "1k", "-1Mi",
                            "250m", "1", "0", "3Ti", "1e-3"),
    "minusQuantity": _strings("100m", "1Gi", "512Mi", "1.5Gi", "2", "0.5", "1e3", "1k",
                              "-1Mi", "250m", "1", "0", "3Ti"),
    "formatQuantity": ["0.5", "1.5", "1024", "1", "0", "-2.5", "3e9", "0.0001", ".spec.f15",
                       '(toFloat "1073741824")', '(parseQuantity "1.5Gi")'],
    "semver": _strings("1.2.3", "v1.2.3", "1.2", "v2", "1.2.3-beta.1", "1.2.3+build.5",
                       "01.2.3", "^1.2.0", ">= 1.0, < 2.0", "~1.2", "1.x", "*", "major",
                       "minor", "patch", "MINOR", "other", "2.0.0-rc.1", "1.2.3-alpha",
                       "1.2.3-alpha.10", "1.2.3-alpha.9", "bad", "", "!=1.2.3",
                       ">1.2.3 || <1.0", "=1.2.3", "1.2.3 - 2.0.0", "~> 1.2", "^0.2.3",
                       "<=1.2.3-rc.1", "1.2.3-rc.1", "0.2.9", "1.2.x", ">=1.2.3-0"),
    "duration": _strings("5m", "1h30m", "2d", "1w", "3mo", "1y", "never", "-5s", "1.5h",
                         "10", "", " 5m", "1.5d", "300ms", "2h45m30.5s", "x"),
    "time": _strings("2020-01-01T00:00:00Z", "2020-01-01", "2099-06-01T12:00:00Z",
                     "2024-02-30T00:00:00Z", "2021-05-05T10:20:30.5+02:00", "15:04", "00:00",
                     "23:59", "24:00", "9:05", "x", "2006-01-02", "Jan 2, 2006 15:04:05 MST",
                     "Monday", "2d", "1h", "Mon Jan _2 15:04:05 2006",
                     "2006-01-02T15:04:05.000Z07:00", "3:04PM", "Z07:00 MST"),
    "isExpired": _strings("2020-01-01T00:00:00Z", "2099-06-01T12:00:00Z", "30d", "1h",
                          "never", "x", "2020-01-01"),
    "ip": _strings("10.0.0.1", "192.168.1.300", "172.20.1.1", "8.8.8.8", "::1", "fd00::1",
                   "::ffff:10.1.2.3", "010.1.1.1", "10.0.0.0/8", "192.168.0.0/16",
                   "2001:db8::/32", "10.0.0.1/33", "1.2.3.4/024", "172.16.0.0/12",
                   "::ffff:0:0/96", "fe80::1%eth0"),
    "cidr": _strings("10.0.0.1", "::ffff:10.1.2.3", "10.0.0.0/8", "192.168.0.0/16",
                     "2001:db8::/32", "10.0.0.1/33", "1.2.3.4/024", "::ffff:0:0/96",
                     "2001:db8::1", "192.168.5.5"),
    "isValid": STRING_REFS,
    "fromBase64": _strings("aGVsbG8=", "aGVsbG8", "aGV sbG8=", "////", "4pyT", "Zm9v\nYmFy",
                           "", "=", "YQ==", "YQ"),
}


def _hint(name: str) -> list[str] | None:
    for prefix in sorted(HINTS, key=len, reverse=True):
        if name.startswith(prefix):
            return HINTS[prefix]
    lowered = name.lower()
    for word in ("duration", "time", "weekday", "weekend"):
        if word in lowered:
            return HINTS["duration" if word == "duration" else "time"]
    return None


def _any_pool() -> list[str]:
    return (STRING_REFS + SCALAR_REFS * 3 + LIST_REFS * 3 + MAP_REFS * 3 + OBJECT_REFS * 4
            + MISSING * 3 + LITERALS * 2 + NESTED * 2)


ANY_POOL = _any_pool()


def _arg(rng: random.Random, code: str, kube: bool, hint: list[str] | None = None) -> str:
    roll = rng.random()
    if roll < 0.1:
        return rng.choice(ANY_POOL)  # a wrong type now and then
    if roll < 0.15:
        return rng.choice(MISSING)
    if hint and roll < 0.8 and code in "asf":
        return rng.choice(hint)
    if code == "a":
        if kube and rng.random() < 0.7:
            return rng.choice(OBJECT_REFS)
        return rng.choice(ANY_POOL)
    return rng.choice(TYPE_POOLS.get(code, ANY_POOL))


def generate(functions: dict[str, Any], names: list[str], seed: int,
             per_function: int) -> dict[str, tuple[str, str]]:
    """{case id: (function name, template)}: `per_function` calls of every name."""
    rng = random.Random(seed)
    cases: dict[str, tuple[str, str]] = {}
    for name in names:
        fn = functions.get(name)
        sig = getattr(fn, "sig", None)
        params = list(sig.params) if sig is not None else ["a"]
        variadic = bool(sig is not None and sig.variadic)
        kube = bool(sig is not None and params[:1] == ["a"] and
                    getattr(fn.impl, "__module__", "").endswith("orkestra_kube"))
        for k in range(per_function):
            count = len(params)
            if variadic:
                count = len(params) - 1 + rng.choice([0, 1, 2, 3, 4])
            elif rng.random() < 0.04:
                count = max(0, count + rng.choice([-1, 1]))  # a wrong number of arguments
            hint = _hint(name)
            args = [_arg(rng, params[min(i, len(params) - 1)] if params else "a", kube, hint)
                    for i in range(count)]
            form = rng.random()
            if args and form < 0.2:
                text = f"{{{{ {args[-1]} | {name} {' '.join(args[:-1])} }}}}"
            elif form < 0.3:
                text = f"{{{{ printf \"%v|%T\" ({name} {' '.join(args)}) 0 }}}}"
            elif form < 0.38:
                text = (f"{{{{ with {name} {' '.join(args)} }}}}yes:{{{{ . }}}}"
                        "{{ else }}no{{ end }}")
            elif form < 0.45:
                text = f"{{{{ len ({name} {' '.join(args)}) }}}}"
            else:
                text = f"{{{{ {name} {' '.join(args)} }}}}"
            cases[f"{name}#{k}"] = (name, text.replace("  ", " "))
    cases.update({f"action#{i}": ("action", t) for i, t in enumerate(ACTIONS)})
    return cases


ACTIONS = [
    "plain text, no action ", "  spaced  ", "{{ .spec.s1 }}", "{{ .spec.fmil }} {{ .spec.huge }}",
    "{{ .spec.fbig }}|{{ .spec.f2 }}|{{ .spec.ibig }}|{{ .spec.imax }}",
    "{{ range .spec.lmix }}[{{ . }}]{{ end }}",
    "{{ range $k, $v := .spec.m1 }}{{ $k }}={{ $v }};{{ end }}",
    "{{ with .spec.missing }}x{{ else }}none{{ end }}", "{{ if .spec.i0 }}y{{ else }}n{{ end }}",
    "{{ .spec.missing.x }}", "{{ .spec.nul }}", "{{ index .spec.lstr 1 }}", "{{ .spec.lnum }}",
    "{{ .spec.m1 }}", "{{ printf \"%v %T\" .spec.f2 .spec.f2 }}", "{{ .spec.s41 }}",
    '{{ define "x" }}X{{ .spec.s2 }}{{ end }}{{ template "x" . }}',
    '{{ define "x" }}[{{ . }}]{{ end }}{{ template "x" .spec.s3 }}-{{ template "x" }}',
    '{{ block "b" .spec.lstr }}{{ range . }}{{ . }}{{ end }}{{ end }}',
    '{{ define "a" }}A{{ template "b" . }}{{ end }}{{ define "b" }}B{{ end }}{{ template "a" }}',
    '{{ template "nope" }}',
    '{{ define "r" }}{{ if . }}{{ . }}{{ template "r" (sub . 1) }}{{ end }}{{ end }}'
    '{{ template "r" 3 }}',
    '{{ define "v" }}{{ $x := 1 }}{{ $x }}{{ end }}{{ $x := 2 }}{{ template "v" }}{{ $x }}',
    '{{- define "t" -}} T {{- end -}} a {{ template "t" }} b',
    '{{ define "x" }}1{{ end }}{{ define "x" }}2{{ end }}{{ template "x" }}',
    '{{ block "x" . }}default{{ end }}{{ define "x" }}override{{ end }}',
    '{{ template "x" . }}{{ define "x" }}{{ .metadata.name }}{{ end }}',
    '{{ define "bad" }}{{ end }', "{{ template .spec.s2 }}",
    '{{ range $i, $e := .spec.lstr }}{{ template "item" $e }}{{ end }}'
    '{{ define "item" }}<{{ . }}>{{ end }}',
    # Orkestra's resolver names the template "f"
    '{{ define "f" }}F{{ .spec.s2 }}{{ end }}', '  {{ define "f" }}F{{ end }}  ',
    'a{{ define "f" }}F{{ end }}', '{{ define "x" }}{{ template "f" }}{{ end }}x',
    '{{ if .spec.missing }}{{ template "f" }}{{ end }}{{ define "y" }}{{ end }}ok',
]

_PLACEHOLDER = re.compile(r"<generate:(randomAlphanumeric|randomHex|randomBase64):(\d+)>|"
                          r"<generate:uuidv4>")
_SHAPES = {"randomAlphanumeric": lambda n: f"[A-Za-z0-9]{{{n}}}",
           "randomHex": lambda n: f"[0-9a-f]{{{2 * n}}}",
           "randomBase64": lambda n: f"[A-Za-z0-9_=-]{{{(n + 2) // 3 * 4}}}"}


def placeholder_shape(text: str) -> re.Pattern[str]:
    """A pattern for the Go output of a text holding placeholders: each placeholder
    stands for a value of its shape."""
    out, pos = [], 0
    for m in _PLACEHOLDER.finditer(text):
        out.append(re.escape(text[pos:m.start()]))
        if m.group(1):
            out.append(_SHAPES[m.group(1)](int(m.group(2))))
        else:
            out.append("[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")
        pos = m.end()
    out.append(re.escape(text[pos:]))
    return re.compile("".join(out), re.S)


RANDOM = ("randomAlphanumeric", "randomHex", "randomBase64", "uuidv4")
CLOCK = ("timeAgo", "timeSince", "timeUntil", "nextCron")

# The allow-list: (function, predicate on (template, go, py), reason). Every entry is in
# docs/differences.md ("Template functions").
Allowed = tuple[str, Callable[[str, dict[str, Any], dict[str, Any]], bool], str]


def _computed_over_random(template: str, go: dict[str, Any], py: dict[str, Any]) -> bool:
    if not any(f in template for f in RANDOM):
        return False
    if py["ok"]:
        return "<generate:expr:" in py["out"]
    return "computed from a random value" in py.get("err", "")


ALLOWED: list[Allowed] = [
    ("*", _computed_over_random,
     "a value computed from a random value is an expression in the render, evaluated when "
     "the Secret is written (compared with Orkestra over the same value by "
     "tests/templates/test_random_expressions.py); a condition on one is an error"),
    ("resourceExists", lambda t, go, py: "objs.cross" in t and go["ok"] and py["ok"],
     "resourceExists of a cross that was not found is false in orksync (Orkestra: true)"),
    ("*", lambda t, go, py: ("asMap" in t or "asList" in t) and go["ok"] and
     bool(re.search(r"\d{4}-\d{1,2}-\d{1,2}", t)) and
     ("time.Time" in go["out"] or "+0000 UTC" in go["out"] or "T" in go["out"]),
     "a YAML timestamp read by asMap/asList stays text in orksync (Orkestra: a time.Time)"),
    ("*", lambda t, go, py: "Quantity" in t and go["ok"] and py["ok"] and
     bool(re.fullmatch(r"-?\d+", go["out"])) and bool(re.fullmatch(r"-?\d+E", py["out"]))
     and go["out"].rstrip("0") == py["out"][:-1].rstrip("0") and
     len(py["out"]) - 1 + 18 - len(go["out"]) >= 21,
     "a quantity of 10^21 or more with trailing zeros loses its suffix in Orkestra "
     "(apimachinery has none beyond E: 10^21 prints `1`); orksync prints `1000E`"),
    ("slice", lambda t, go, py: go["ok"] and not py["ok"] and
     "index out of range" in py["err"],
     "slice cannot reach past a list's length into its capacity in orksync"),
]


def _numbers_close(a: str, b: str, tolerance: int) -> bool:
    try:
        return abs(int(a) - int(b)) <= tolerance
    except ValueError:
        return False


def compare(name: str, template: str, go: dict[str, Any], py: dict[str, Any]) -> str | None:
    """None when the results agree; else why they differ ("allowed: ..." when the
    difference is on the allow-list)."""
    for func, predicate, reason in ALLOWED:
        if (func == "*" or func == name) and predicate(template, go, py):
            return f"allowed: {reason}"
    if go["ok"] != py["ok"]:
        return "one side failed"
    if not go["ok"]:
        return None
    if go["out"] == py["out"]:
        return None
    if _PLACEHOLDER.search(py["out"]) and placeholder_shape(py["out"]).fullmatch(go["out"]):
        return None
    if name == "mapValues" and sorted(go["out"]) == sorted(py["out"]):
        return None  # Go's map iteration order is random; orksync's is the keys' order
    if name in CLOCK and _clock_close(go["out"], py["out"]):
        return None
    return "outputs differ"


def _clock_close(a: str, b: str) -> bool:
    """Two outputs of a clock note, read a moment apart: instants within 3 s (a minute's
    or an hour's boundary may fall between them), or the same text but for numbers that
    differ by at most 3 (durations). A count of seconds is a number, not an instant:
    `fromisoformat` would read `90020826` as the date 9002-08-26 (ISO's basic format)."""
    with contextlib.suppress(ValueError):
        if re.fullmatch(r"-?\d+", a.strip()) or re.fullmatch(r"-?\d+", b.strip()):
            raise ValueError("a number")
        ta = datetime.fromisoformat(a.strip().replace("Z", "+00:00"))
        tb = datetime.fromisoformat(b.strip().replace("Z", "+00:00"))
        return abs((ta - tb).total_seconds()) <= 3
    na = re.sub(r"\d+", "#", a)
    if na != re.sub(r"\d+", "#", b):
        return False
    da, db = re.findall(r"\d+", a), re.findall(r"\d+", b)
    return all(_numbers_close(x, y, 3) for x, y in zip(da, db, strict=True))


# ── The dark corners: the categories where orksync and Orkestra disagreed once ──────────
# generate_dark(seed, count) draws templates from each category with varied arguments;
# test_orkoracle_differential runs them against the oracle (the seed printed on failure).
_TZ_PREFIXES = ["", "", "", "CRON_TZ=UTC ", "TZ=UTC ", "CRON_TZ=Europe/Paris ",
                "TZ=Asia/Tokyo ", "CRON_TZ=America/New_York ", "TZ=Nowhere/X ", "tz=UTC ",
                "CRON_TZ= "]
_DESCRIPTORS = ["@daily", "@Daily", "@DAILY", "@hourly", "@Hourly", "@weekly", "@monthly",
                "@yearly", "@annually", "@midnight", "@every 1h", "@every 90s", "@every 1.5h",
                "@every 500ms", "@every x", "@Every 1h", "@daily ", " @daily", "@nope"]


def _cron_field(rng: random.Random, low: int, high: int, names: list[str]) -> str:
    a, b = sorted(rng.sample(range(low, high + 1), 2))
    step = rng.choice([1, 2, 3, 5, 7, 0])
    choices = ["*", "?", f"*/{step}", str(a), f"{a}-{b}", f"{a},{b}", f"{a}-{b}/{step}",
               f"{a}/{step}", f"+{a}", f"{b}-{a}", str(high + 1), f"0{a}", "*/1"]
    if names:
        choices += [rng.choice(names), rng.choice(names).lower(),
                    f"{names[0]}-{rng.choice(names)}"]
    return rng.choice(choices)


def _cron(rng: random.Random) -> str:
    prefix = rng.choice(_TZ_PREFIXES)
    if rng.random() < 0.3:
        return prefix + rng.choice(_DESCRIPTORS)
    fields = [_cron_field(rng, 0, 59, []), _cron_field(rng, 0, 23, []),
              _cron_field(rng, 1, 31, []),
              _cron_field(rng, 1, 12, ["JAN", "FEB", "MAR", "JUN", "DEC"]),
              _cron_field(rng, 0, 6, ["SUN", "MON", "TUE", "FRI", "SAT"])]
    if rng.random() < 0.05:
        fields = fields[:rng.randint(0, 4)]
    sep = rng.choice([" ", " ", " ", "  ", "\\t"])
    return prefix + sep.join(fields)


def _timestamp(rng: random.Random) -> str:
    year = rng.choice(["0000", "0001", "1969", "1970", "2024", "2000", "9999", "2100"])
    month = rng.choice(["01", "02", "12", "13", "00", "1"])
    day = rng.choice(["01", "28", "29", "30", "31", "00"])
    if rng.random() < 0.15:
        return f"{year}-{month}-{day}"
    hour = rng.choice(["00", "10", "23", "24", "1", "9"])
    minute = rng.choice(["00", "30", "59", "60"])
    second = rng.choice(["00", "59", "60"])
    frac = rng.choice(["", "", ".5", ",5", ".123456789", ".123456789999", ",000001", ".",
                       ".1234567"])
    zone = rng.choice(["Z", "Z", "+02:00", "-05:30", "+24:00", "-24:00", "+23:60", "+25:00",
                       "z", "+0200", ""])
    sep = rng.choice(["T", "T", "T", "t", " "])
    return f"{year}-{month}-{day}{sep}{hour}:{minute}:{second}{frac}{zone}"


_LAYOUTS = ["2006", "2006-01-02", "2006-01-02T15:04:05Z07:00", "15:04:05.000000000",
            "15:04:05.999999999", "05,000", "Mon Jan _2 2006", "Monday 002 __2", "3:04PM",
            "2006-01-02 15:04:05.999999999 -0700 MST", "06 1 2 .9 ,000"]
_YAML_SCALARS = ["017", "-017", "08", "0o17", "0O17", "0x1F", "0X1f", "0x_1F", "0b101",
                 "-0b101", "1_000", "1__0", "_1", "1_", "0", "00", "-0", "+12", "012_3",
                 "18446744073709551615", "18446744073709551616", "9223372036854775808",
                 "-9223372036854775809", "1e3", "1.", ".5", "+.5", "1e", "0x", "0o8", "089",
                 ".inf", "-.Inf", ".NaN", "~", "null", "Null", "yes", "on", "y", "True",
                 "TRUE", "tRue", "'017'", '"0x1F"', "abc", "1.2.3", "0.0.1", "-", "+",
                 "2024-01-15", "2024-1-5 1:2:3.5", "2024-01-15T10:30:00Z", "2024-13-45"]
_URLS = ["https://ex%20ample.com", "https://ex%C3%A9.com", "http://a%25b.com",
         "http://a%7Fb.com", "https://ex%2Fample.com", "https://example.com/%20",
         "https://example.com/%zz", "http://[::1]:80/", "http://[fe80::1%25en0]/",
         "https://example.com\n", "https://exa mple.com", "http://", "http://:80",
         "https://user:p%40ss@host/", "HTTPS://EXAMPLE.COM", "http://host:port/",
         "http://host:8080x/", "https://exa_mple.com", "mailto:a@b.c", "//host/x"]
_EMAILS = ["a@b.c", "a@b.c\\n", "a@b.c\\r", "a@b.c\\t", "a@b.c ", " a@b.c", "\\ta@b.c",
           "\\na@b.c", "a@b.c\\r\\n", "A <a@b.c>", "a@b", "a.@b.c", '"a b"@c.d',
           "a@[1.2.3.4]", "a@b..c", "a+tag@b.c", "(x) a@b.c", "a@b.c (x)", "", "@"]
_ODD_STRINGS = ["\\f", "\\b", "\\x01", "\\x7f", "\\xff", "a\\xffb", "\\xc3(", "\\xe2\\x82",
                "\\u2028", "\\u2029", "<&>", "é", "\\ufffd", "ǅ", "İ", "ß", "\\t\\n\\r",
                "\\x00", "A\\xffB", "ΣΑΣ"]
_QUANTITIES = ["1e19", "1", "-1e19", "9223372036854775807", "9223372036854775808", "1Ei",
               "8Ei", "16Ei", "-8Ei", "1e18", "123456789012345678901234", "1.5e20m", "1Pi",
               "100m", "1e-9", "1n", "999999999999999999999", "0", "1E", "7Ei", "1e400",
               "1e400m", "1.5e300", "-1e300"]


def _lit(text: str) -> str:
    """A Go string literal of a text that may hold Go escapes (`\\n`, `\\xff`)."""
    return '"' + text.replace('"', '\\"') + '"'


def _dark_cron(rng: random.Random) -> tuple[str, str]:
    return "nextCron", f"{{{{ nextCron {_lit(_cron(rng))} }}}}"


def _dark_yaml(rng: random.Random) -> tuple[str, str]:
    values = [rng.choice(_YAML_SCALARS) for _ in range(rng.randint(1, 3))]
    if rng.random() < 0.5:
        body = "\\n".join(f"k{i}: {v}" for i, v in enumerate(values))
        if rng.random() < 0.1:
            body = f"{values[0]}: x"
        call = f"(asMap {_lit(body)})"
    else:
        call = f"(asList {_lit('[' + ', '.join(values) + ']')})"
    form = rng.choice(["{{ %s | toJson }}", "{{ %s }}", '{{ printf "%%#v" %s }}',
                       "{{ range $k, $v := %s }}{{ $k }}={{ printf \"%%T\" $v }};{{ end }}"])
    return ("asMap" if "asMap" in call else "asList"), form % call


def _dark_time(rng: random.Random) -> tuple[str, str]:
    stamp = _lit(_timestamp(rng))
    roll = rng.random()
    if roll < 0.5:
        return "timeFormat", f"{{{{ timeFormat {stamp} {_lit(rng.choice(_LAYOUTS))} }}}}"
    if roll < 0.75:
        duration = _lit(rng.choice(["-5m", "5m", "1h", "-1h", "2540400h", "30d", "1y",
                                    "never", "x"]))
        return "isExpired", f"{{{{ isExpired {stamp} {duration} }}}}"
    name = rng.choice(["timeAgo", "timeSince", "timeUntil"])
    return name, f"{{{{ {name} {stamp} }}}}"


def _dark_quantity(rng: random.Random) -> tuple[str, str]:
    name = rng.choice(["sumQuantity", "minusQuantity"])
    a, b = rng.choice(_QUANTITIES), rng.choice(_QUANTITIES)
    return name, f"{{{{ {name} {_lit(a)} {_lit(b)} }}}}"


def _dark_json(rng: random.Random) -> tuple[str, str]:
    text = "".join(rng.choice(_ODD_STRINGS) for _ in range(rng.randint(1, 3)))
    name = rng.choice(["toJson", "toJSON", "toLower", "toUpper"])
    form = rng.choice(["{{ %s %s }}", "{{ len (%s %s) }}", "{{ %s %s | printf \"%%q\" }}"])
    return name, form % (name, _lit(text))


def _dark_printf(rng: random.Random) -> tuple[str, str]:
    value = rng.choice(['(split "a,b" ",")', '(split "" ",")', '(toList "a, b")',
                        '(toList "")', "(mapKeys .spec.m1)", "(mapKeys .spec.m0)",
                        ".spec.lstr", '(asList "[a, 1]")',
                        '(list "a" "b")', '(append (split "a" ",") "b")'])
    verb = rng.choice(["%#v", "%T", "%v", "%q", "%#v|%T"])
    args = " ".join([value] * verb.count("%"))
    return "printf", f"{{{{ printf {_lit(verb)} {args} }}}}"


def _dark_valid(rng: random.Random) -> tuple[str, str]:
    if rng.random() < 0.5:
        return "isValidURL", f"{{{{ isValidURL {_lit(rng.choice(_URLS))} }}}}"
    return "isValidEmail", f"{{{{ isValidEmail {_lit(rng.choice(_EMAILS))} }}}}"


def _dark_slice(rng: random.Random) -> tuple[str, str]:
    target = rng.choice([".spec.lstr", ".spec.lmix", ".spec.s2", '"abcdef"', ".spec.l0"])
    index = rng.choice([".spec.i1", "$.spec.i1", "(.spec.i1)", "1", "$i", ".spec.i0",
                        ".spec.f15", ".spec.nul", ".spec.missing", "(len .spec.lstr)",
                        "(add .spec.i1 0)", ".spec.s22", "2", "0"])
    second = rng.choice(["", "", " 2", " .spec.i3", " 3", " 9"])
    if index == "$i":
        return "slice", f"{{{{ $i := .spec.i1 }}}}{{{{ slice {target} $i{second} }}}}"
    if rng.random() < 0.2:
        return "slice", f"{{{{ {index} | slice {target} }}}}"
    return "slice", f"{{{{ slice {target} {index}{second} }}}}"


DARK_CATEGORIES: dict[str, Callable[[random.Random], tuple[str, str]]] = {
    "cron": _dark_cron, "yaml": _dark_yaml, "time": _dark_time, "quantity": _dark_quantity,
    "json": _dark_json, "printf": _dark_printf, "valid": _dark_valid, "slice": _dark_slice,
}


def generate_dark(seed: int, count: int) -> dict[str, tuple[str, str]]:
    """{case id: (function name, template)}: `count` templates of the dark-corner
    categories, drawn in turn."""
    rng = random.Random(seed)
    cases: dict[str, tuple[str, str]] = {}
    names = sorted(DARK_CATEGORIES)
    for k in range(count):
        category = names[k % len(names)]
        cases[f"dark-{category}#{k}"] = DARK_CATEGORIES[category](rng)
    return cases
