// Command checker reads a recorded history (as tests/robustness/history.py prepares it) and checks each of its
// checks with Porcupine against the registry's model (model.go): Ok, Illegal, or Unknown when the timeout ran out
// (a failure for the tier). For every check that is not Ok it writes Porcupine's HTML visualisation of the
// failing partitions into the report folder.
//
//	checker -in checks.json -report DIR      prints one JSON result line
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"
)

type op struct {
	P      string `json:"p"`
	Client int    `json:"c"`
	Call   int64  `json:"call"`
	Ret    int64  `json:"ret"` // -1: never returned (an unknown outcome, open to the end)
	In     Input  `json:"in"`
	Out    Output `json:"out"`
}

type check struct {
	Name    string `json:"name"`
	Session bool   `json:"session"` // reads of one session are linearized in their order
	Ops     []op   `json:"ops"`
}

type annotation struct {
	Tag   string `json:"tag"`
	Start int64  `json:"start"`
	End   int64  `json:"end"`
	Text  string `json:"text"`
}

type input struct {
	TimeoutS    float64      `json:"timeout_s"`
	Checks      []check      `json:"checks"`
	Annotations []annotation `json:"annotations"`
}

type result struct {
	Name       string   `json:"name"`
	Result     string   `json:"result"`
	Ops        int      `json:"ops"`
	Partitions int      `json:"partitions"`
	Failed     []string `json:"failed_partitions,omitempty"`
	Html       string   `json:"html,omitempty"`
	Seconds    float64  `json:"seconds"`
}

func model(session bool) porcupine.Model {
	nm := porcupine.NondeterministicModel{
		Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
			by := map[string][]porcupine.Operation{}
			var keys []string
			for _, o := range history {
				p := o.Metadata.(string)
				if _, ok := by[p]; !ok {
					keys = append(keys, p)
				}
				by[p] = append(by[p], o)
			}
			sort.Strings(keys)
			out := make([][]porcupine.Operation, 0, len(keys))
			for _, k := range keys {
				out = append(out, by[k])
			}
			return out
		},
		Init: func() []interface{} { return []interface{}{(&State{}).finish()} },
		Step: func(state, in, out interface{}) []interface{} {
			next := step(state.(*State), in.(Input), out.(Output), session)
			res := make([]interface{}, len(next))
			for i, s := range next {
				res[i] = s
			}
			return res
		},
		Equal:                     func(a, b interface{}) bool { return a.(*State).key == b.(*State).key },
		Hash:                      func(s interface{}) uint64 { return hashKey(s.(*State).key) },
		DescribeOperation:         func(in, out interface{}) string { return describeOp(in.(Input), out.(Output)) },
		DescribeState:             func(s interface{}) string { return describeState(s.(*State)) },
		DescribeOperationMetadata: func(m interface{}) string { return fmt.Sprint(m) },
	}
	return nm.ToModel()
}

func operations(ops []op) []porcupine.Operation {
	h := make([]porcupine.Operation, len(ops))
	for i, o := range ops {
		ret := o.Ret
		if ret < 0 {
			ret = math.MaxInt64
		}
		h[i] = porcupine.Operation{ClientId: o.Client, Input: o.In, Call: o.Call, Output: o.Out, Return: ret, Metadata: o.P}
	}
	return h
}

func run(c check, timeout time.Duration, report string, notes []annotation) result {
	start := time.Now()
	m := model(c.Session)
	h := operations(c.Ops)
	parts := map[string][]porcupine.Operation{}
	for _, o := range h {
		parts[o.Metadata.(string)] = append(parts[o.Metadata.(string)], o)
	}
	res := porcupine.CheckOperationsTimeout(m, h, timeout)
	r := result{Name: c.Name, Result: string(res), Ops: len(h), Partitions: len(parts)}
	if res != porcupine.Ok && report != "" {
		// which partitions fail (each alone), then Porcupine's visualisation of those only
		var bad []porcupine.Operation
		left := timeout - time.Since(start)
		for _, p := range sortedKeys(parts) {
			if left <= 0 {
				break
			}
			t := time.Now()
			if porcupine.CheckOperationsTimeout(m, parts[p], left) != porcupine.Ok {
				r.Failed = append(r.Failed, p)
				bad = append(bad, parts[p]...)
			}
			left -= time.Since(t)
		}
		if len(bad) > 0 {
			_, info := porcupine.CheckOperationsVerbose(m, bad, max(left, 10*time.Second))
			var anns []porcupine.Annotation
			for _, a := range notes {
				anns = append(anns, porcupine.Annotation{Tag: a.Tag, Start: a.Start, End: a.End, Description: a.Text,
					BackgroundColor: "#ffd7d7"})
			}
			info.AddAnnotations(anns)
			path := filepath.Join(report, c.Name+".html")
			if err := porcupine.VisualizePath(m, info, path); err == nil {
				r.Html = path
			}
		}
	}
	r.Seconds = time.Since(start).Seconds()
	return r
}

func sortedKeys(m map[string][]porcupine.Operation) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func main() {
	in := flag.String("in", "", "the checks (JSON)")
	report := flag.String("report", "", "folder for visualisations of failures")
	each := flag.Bool("each", false, "check every partition alone and print its time (to stderr): which is slow")
	flag.Parse()
	raw, err := os.ReadFile(*in)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var data input
	if err := json.Unmarshal(raw, &data); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	timeout := time.Duration(data.TimeoutS * float64(time.Second))
	var results []result
	if *each {
		for _, c := range data.Checks {
			m := model(c.Session)
			parts := map[string][]porcupine.Operation{}
			for _, o := range operations(c.Ops) {
				parts[o.Metadata.(string)] = append(parts[o.Metadata.(string)], o)
			}
			for _, p := range sortedKeys(parts) {
				t := time.Now()
				res := porcupine.CheckOperationsTimeout(m, parts[p], timeout)
				fmt.Fprintf(os.Stderr, "%s %s: %s, %d operations, %.2f s\n", c.Name, p, res, len(parts[p]),
					time.Since(t).Seconds())
			}
		}
	}
	for _, c := range data.Checks {
		results = append(results, run(c, timeout, *report, data.Annotations))
	}
	enc := json.NewEncoder(os.Stdout)
	if err := enc.Encode(map[string]interface{}{"checks": results}); err != nil {
		os.Exit(2)
	}
}
