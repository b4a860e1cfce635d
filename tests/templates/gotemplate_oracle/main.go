// Command gotemplate-oracle executes Go text/template exactly as Orkestra does
// (option missingkey=zero), for differential tests of orksync's Python engine.
//
// Protocol: one JSON object per stdin line,
//
//	{"template": "...", "data": {...}, "funcs": ["upper", ...]}
//
// and one JSON object per stdout line, in order:
//
//	{"ok": true, "out": "..."}  or  {"ok": false, "phase": "parse"|"exec", "error": "..."}
//
// A template that does not finish within the time limit (Go's `range` over a huge
// integer never ends in practice, and text/template has no step budget) is answered
// {"ok": false, "phase": "timeout"} and the process exits: its goroutine cannot be
// stopped. The caller starts a new one for the cases after it.
//
// Data numbers are decoded like Kubernetes' unstructured JSON: integral numbers that
// fit become int64, all others float64. "funcs" selects which of the test functions
// below are installed (absent: all of them). The output is raw Go output: no
// Orkestra post-processing. Standard library only.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"text/template"
	"time"
)

const timeLimit = 10 * time.Second

type request struct {
	Template string          `json:"template"`
	Data     json.RawMessage `json:"data"`
	Funcs    *[]string       `json:"funcs"`
}

type response struct {
	OK    bool   `json:"ok"`
	Out   string `json:"out"`
	Phase string `json:"phase,omitempty"`
	Error string `json:"error,omitempty"`
}

// testFuncs mirrors tests/templates/test_gotemplate_differential.py's TEST_FUNCS: keep in sync.
var testFuncs = template.FuncMap{
	"upper": func(s any) (string, error) { // ASCII letters only
		str, ok := s.(string)
		if !ok {
			return "", fmt.Errorf("upper: not a string: %T", s)
		}
		b := []byte(str)
		for i, c := range b {
			if 'a' <= c && c <= 'z' {
				b[i] = c - 'a' + 'A'
			}
		}
		return string(b), nil
	},
	"add": func(a, b any) (int64, error) {
		x, okx := asInt64(a)
		y, oky := asInt64(b)
		if !okx || !oky {
			return 0, fmt.Errorf("add: not integers: %T %T", a, b)
		}
		sum := x + y
		if (sum > x) != (y > 0) {
			return 0, errors.New("add: overflow")
		}
		return sum, nil
	},
	"join": func(list any, sep any) (string, error) {
		items, ok := list.([]any)
		s, oks := sep.(string)
		if !ok || !oks {
			return "", fmt.Errorf("join: bad arguments: %T %T", list, sep)
		}
		parts := make([]string, len(items))
		for i, item := range items {
			parts[i] = fmt.Sprint(item)
		}
		return strings.Join(parts, s), nil
	},
	"list": func(items ...any) []any { return append([]any{}, items...) },
	"dict": func(kv ...any) (map[string]any, error) {
		if len(kv)%2 != 0 {
			return nil, errors.New("dict: odd number of arguments")
		}
		m := make(map[string]any, len(kv)/2)
		for i := 0; i < len(kv); i += 2 {
			k, ok := kv[i].(string)
			if !ok {
				return nil, fmt.Errorf("dict: key is not a string: %T", kv[i])
			}
			m[k] = kv[i+1]
		}
		return m, nil
	},
	"echo": func(v any) any { return v },
	"nilf": func() any { return nil },
	"fail": func() (any, error) { return nil, errors.New("fail: always fails") },
}

func asInt64(v any) (int64, bool) {
	switch n := v.(type) {
	case int:
		return int64(n), true
	case int64:
		return n, true
	}
	return 0, false
}

// convertNumbers turns json.Number leaves into int64 (when integral and in range)
// or float64, as k8s.io/apimachinery's unstructured decoding does.
func convertNumbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		f, _ := x.Float64()
		return f
	case map[string]any:
		for k, e := range x {
			x[k] = convertNumbers(e)
		}
		return x
	case []any:
		for i, e := range x {
			x[i] = convertNumbers(e)
		}
		return x
	}
	return v
}

func decodeData(raw json.RawMessage) (any, error) {
	if len(raw) == 0 {
		return map[string]any{}, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var data any
	if err := dec.Decode(&data); err != nil {
		return nil, err
	}
	return convertNumbers(data), nil
}

func selectFuncs(names *[]string) template.FuncMap {
	if names == nil {
		return testFuncs
	}
	funcs := template.FuncMap{}
	for _, name := range *names {
		if f, ok := testFuncs[name]; ok {
			funcs[name] = f
		}
	}
	return funcs
}

func run(req request) (resp response) {
	defer func() {
		if r := recover(); r != nil {
			resp = response{OK: false, Phase: "panic", Error: fmt.Sprint(r)}
		}
	}()
	data, err := decodeData(req.Data)
	if err != nil {
		return response{OK: false, Phase: "data", Error: err.Error()}
	}
	tmpl, err := template.New("t").Option("missingkey=zero").Funcs(selectFuncs(req.Funcs)).Parse(req.Template)
	if err != nil {
		return response{OK: false, Phase: "parse", Error: err.Error()}
	}
	var out strings.Builder
	if err := tmpl.Execute(&out, data); err != nil {
		return response{OK: false, Phase: "exec", Error: err.Error()}
	}
	return response{OK: true, Out: out.String()}
}

func main() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 64<<20)
	out := bufio.NewWriter(os.Stdout)
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	for in.Scan() {
		var req request
		if err := json.Unmarshal(in.Bytes(), &req); err != nil {
			_ = enc.Encode(response{OK: false, Phase: "request", Error: err.Error()})
		} else {
			done := make(chan response, 1)
			go func() { done <- run(req) }()
			select {
			case resp := <-done:
				_ = enc.Encode(resp)
			case <-time.After(timeLimit):
				_ = enc.Encode(response{OK: false, Phase: "timeout",
					Error: fmt.Sprintf("did not finish within %s", timeLimit)})
				_ = out.Flush()
				os.Exit(3)
			}
		}
		if err := out.Flush(); err != nil {
			os.Exit(1)
		}
	}
}
