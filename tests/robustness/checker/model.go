package main

// The registry as Porcupine checks it: one partition per topic (a route), per KV key, and one for the cluster's
// broker membership. A write's effect on one partition is what it does to that topic (or key, or membership);
// the recorder (tests/robustness/history.py) projects every operation onto the partitions it touches.
//
// The model is non-deterministic (a set of states): a write whose outcome is unknown (it failed or timed out) may
// or may not have happened, a registration inside the declared loss window (docs/deviations.md) may be
// acknowledged without being applied, an expiry may or may not have run, and a chunked registration whose worker
// died may have written this topic or not.

import (
	"fmt"
	"hash/fnv"
	"sort"
	"strings"
)

// Input is one operation's request, projected onto a partition.
type Input struct {
	Kind    string `json:"k"`                 // reg unreg drop expire delete wipe add read exists members kvput kvdel kvget
	Broker  string `json:"b,omitempty"`       // the broker a write is about
	Q       int    `json:"q,omitempty"`       // reg: the queue count it lists for this topic (0: not listed)
	DV      int    `json:"dv,omitempty"`      // reg: its data version counter
	Conn    string `json:"conn,omitempty"`    // reg: the native connection it came on; drop: the one that closed
	Seq     int    `json:"seq,omitempty"`     // reg: the broker's contact number; expire: only before contact Seq
	Lose    bool   `json:"lose,omitempty"`    // reg: inside the declared loss window (acknowledged, maybe not applied)
	Unknown bool   `json:"unknown,omitempty"` // write: failed or timed out, may or may not have happened
	Chunked bool   `json:"chunked,omitempty"` // reg: applied in steps (a dead worker leaves it half-way)
	Sticky  bool   `json:"sticky,omitempty"`  // reg: the same bytes again on its connection (may be answered from memory)
	Window  bool   `json:"window,omitempty"`  // write: inside a failover's loss window (a failover may undo it)
	Value   string `json:"v,omitempty"`       // kvput
	Sess    int    `json:"sess,omitempty"`    // read: its session (one client through one worker), for the session check
	SSeq    int    `json:"sseq,omitempty"`    // read: its place in the session
	Desc    string `json:"desc,omitempty"`    // for the visualisation: door, worker, stream
}

// Output is what a read returned (writes return nothing the model looks at).
type Output struct {
	Route   map[string]string `json:"route,omitempty"` // broker -> "<q>w" (writable) or "<q>r"; empty: no route
	Exists  *bool             `json:"exists,omitempty"`
	Members []string          `json:"members,omitempty"`
	Value   *string           `json:"value,omitempty"` // kvget: nil = no such key
	Failed  bool              `json:"failed,omitempty"`
}

type broker struct {
	name    string
	present bool   // registered (in brokerAddrTable)
	dv      int    // the data version the store holds for it
	q       int    // its queue data of this topic (0: none)
	w       bool   // that queue data's write bit
	conn    string // the connection its last store-confirmed registration came on
	seq     int    // its last contact number applied
	partial bool   // a chunked registration of it was cut short: the next one writes every topic again
}

// State of one partition. Immutable: every step builds a new one.
type State struct {
	brokers []broker // sorted by name
	value   *string
	sess    []int    // session check: the last SSeq linearized, per session id (index)
	snaps   []*State // states before each write inside a failover's loss window (a failover may go back to one)
	key     string
}

func (s *State) finish() *State {
	var b strings.Builder
	for _, x := range s.brokers {
		fmt.Fprintf(&b, "%s:%t:%d:%d:%t:%s:%d:%t;", x.name, x.present, x.dv, x.q, x.w, x.conn, x.seq, x.partial)
	}
	if s.value != nil {
		b.WriteString("=" + *s.value)
	}
	for i, n := range s.sess {
		if n > 0 {
			fmt.Fprintf(&b, "|%d:%d", i, n)
		}
	}
	for _, x := range s.snaps {
		b.WriteString("<" + x.key + ">")
	}
	s.key = b.String()
	return s
}

func (s *State) find(name string) (int, broker) {
	for i, x := range s.brokers {
		if x.name == name {
			return i, x
		}
	}
	return -1, broker{name: name}
}

func (s *State) with(b broker) *State {
	n := &State{value: s.value, sess: s.sess, snaps: s.snaps}
	n.brokers = make([]broker, 0, len(s.brokers)+1)
	done := false
	for _, x := range s.brokers {
		if x.name == b.name {
			n.brokers = append(n.brokers, b)
			done = true
		} else {
			n.brokers = append(n.brokers, x)
		}
	}
	if !done {
		n.brokers = append(n.brokers, b)
		sort.Slice(n.brokers, func(i, j int) bool { return n.brokers[i].name < n.brokers[j].name })
	}
	return n.finish()
}

func (s *State) mapBrokers(f func(broker) broker) *State {
	n := &State{value: s.value, sess: s.sess, snaps: s.snaps, brokers: make([]broker, len(s.brokers))}
	for i, x := range s.brokers {
		n.brokers[i] = f(x)
	}
	return n.finish()
}

// route is what a route read of this state shows: broker -> "<q>w|r" for every broker with queue data.
func (s *State) route() map[string]string {
	r := map[string]string{}
	for _, x := range s.brokers {
		if x.q > 0 {
			perm := "r"
			if x.w {
				perm = "w"
			}
			r[x.name] = fmt.Sprintf("%d%s", x.q, perm)
		}
	}
	return r
}

func (s *State) members() []string {
	var m []string
	for _, x := range s.brokers {
		if x.present {
			m = append(m, x.name)
		}
	}
	return m
}

func sameRoute(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func sameList(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	a2, b2 := append([]string(nil), a...), append([]string(nil), b...)
	sort.Strings(a2)
	sort.Strings(b2)
	for i := range a2 {
		if a2[i] != b2[i] {
			return false
		}
	}
	return true
}

func removed(x broker) broker {
	return broker{name: x.name, seq: x.seq}
}

// apply gives the states a write leads to when it happens (several for a chunked registration cut short).
func apply(s *State, in Input) []*State {
	switch in.Kind {
	case "reg":
		_, x := s.find(in.Broker)
		// the store writes this topic when the broker is new, its data version changed, a chunked registration of
		// it was cut short, or the topic has no queue data of it (only missing topics are rebuilt otherwise)
		write := !x.present || x.dv != in.DV || x.partial || x.q == 0
		n := x
		// the contact number only grows (max, not last): registrations that change nothing commute
		n.present, n.dv, n.seq, n.partial = true, in.DV, max(x.seq, in.Seq), false
		if in.Conn != "" {
			n.conn = in.Conn
		}
		if write && in.Q > 0 {
			n.q, n.w = in.Q, true
		}
		out := []*State{s.with(n)}
		if in.Sticky && x.present && x.dv == in.DV && !x.partial && (x.q > 0 || in.Q == 0) {
			// answered from memory: liveness only, its recorded connection stays the one the store confirmed last
			m := n
			m.conn = x.conn
			out = append(out, s.with(m))
		}
		if in.Chunked && in.Unknown {
			p := n
			p.partial = true
			out = append(out, s.with(p))
		}
		return out
	case "unreg":
		_, x := s.find(in.Broker)
		return []*State{s.with(removed(x))}
	case "drop":
		_, x := s.find(in.Broker)
		if x.present && x.conn == in.Conn {
			return []*State{s.with(removed(x))}
		}
		return []*State{s}
	case "expire":
		_, x := s.find(in.Broker)
		if x.present && x.seq < in.Seq {
			return []*State{s.with(removed(x))}
		}
		return []*State{s}
	case "delete":
		return []*State{s.mapBrokers(func(x broker) broker { x.q, x.w = 0, false; return x })}
	case "wipe", "add":
		i, x := s.find(in.Broker)
		if i < 0 || x.q == 0 {
			return []*State{s}
		}
		x.w = in.Kind == "add"
		return []*State{s.with(x)}
	case "kvput":
		v := in.Value
		return []*State{(&State{brokers: s.brokers, value: &v, sess: s.sess, snaps: s.snaps}).finish()}
	case "kvdel":
		return []*State{(&State{brokers: s.brokers, sess: s.sess, snaps: s.snaps}).finish()}
	}
	panic("unknown write kind " + in.Kind)
}

func isRead(kind string) bool {
	return kind == "read" || kind == "exists" || kind == "members" || kind == "kvget"
}

// step: the states an operation may lead to from `s` (none: it cannot happen here).
func step(s *State, in Input, out Output, session bool) []*State {
	if in.Kind == "failover" {
		// the new primary has what the old one had at some point of its loss window: now, or before any write
		// inside the window (Redis replicates in order, so what is lost is a suffix)
		next := []*State{(&State{brokers: s.brokers, value: s.value, sess: s.sess}).finish()}
		for _, snap := range s.snaps {
			next = append(next, (&State{brokers: snap.brokers, value: snap.value, sess: s.sess}).finish())
		}
		return next
	}
	if !isRead(in.Kind) {
		next := apply(s, in)
		if in.Window {
			snap := (&State{brokers: s.brokers, value: s.value}).finish()
			for i, n := range next {
				if n.key != s.key {
					m := *n
					m.snaps = append(append([]*State(nil), s.snaps...), snap)
					next[i] = m.finish()
				}
			}
		}
		if in.Unknown || in.Lose || in.Kind == "expire" {
			next = append(next, s) // it may not have happened (an expiry may not have run yet)
		}
		return next
	}
	ok := false
	switch in.Kind {
	case "read":
		ok = sameRoute(s.route(), out.Route)
	case "exists":
		ok = out.Exists != nil && *out.Exists == (len(s.route()) > 0)
	case "members":
		ok = sameList(s.members(), out.Members)
	case "kvget":
		ok = (s.value == nil && out.Value == nil) || (s.value != nil && out.Value != nil && *s.value == *out.Value)
	}
	if !ok {
		return nil
	}
	if !session || in.Sess == 0 {
		return []*State{s}
	}
	// the session check: a session's reads are linearized in the order it made them (monotonic reads)
	last := 0
	if in.Sess < len(s.sess) {
		last = s.sess[in.Sess]
	}
	if in.SSeq != last+1 {
		return nil
	}
	sess := make([]int, max(len(s.sess), in.Sess+1))
	copy(sess, s.sess)
	sess[in.Sess] = in.SSeq
	return []*State{(&State{brokers: s.brokers, value: s.value, sess: sess, snaps: s.snaps}).finish()}
}

func hashKey(k string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(k))
	return h.Sum64()
}

func describeState(s *State) string {
	var parts []string
	for _, x := range s.brokers {
		d := x.name
		if !x.present {
			d += " (gone)"
		} else {
			d += fmt.Sprintf(" dv%d", x.dv)
		}
		if x.q > 0 {
			perm := "r"
			if x.w {
				perm = "w"
			}
			d += fmt.Sprintf(" q%d%s", x.q, perm)
		}
		if x.partial {
			d += " partial"
		}
		parts = append(parts, d)
	}
	if s.value != nil {
		parts = append(parts, fmt.Sprintf("value=%q", *s.value))
	}
	if len(parts) == 0 {
		return "{}"
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

func describeOp(in Input, out Output) string {
	var d string
	switch in.Kind {
	case "reg":
		d = fmt.Sprintf("reg %s dv%d q%d #%d", in.Broker, in.DV, in.Q, in.Seq)
		if in.Conn != "" {
			d += " on " + in.Conn
		}
		if in.Lose {
			d += " (may be lost)"
		}
	case "unreg", "wipe", "add":
		d = fmt.Sprintf("%s %s", in.Kind, in.Broker)
	case "drop":
		d = fmt.Sprintf("drop %s (%s closed)", in.Broker, in.Conn)
	case "expire":
		d = fmt.Sprintf("may expire %s (before #%d)", in.Broker, in.Seq)
	case "delete":
		d = "delete topic"
	case "failover":
		d = "failover (may lose the writes of its window)"
	case "kvput":
		d = fmt.Sprintf("put %q", in.Value)
	case "kvdel":
		d = "delete key"
	case "read":
		if len(out.Route) == 0 {
			d = "read -> no route"
		} else {
			keys := make([]string, 0, len(out.Route))
			for k := range out.Route {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			var kv []string
			for _, k := range keys {
				kv = append(kv, k+" q"+out.Route[k])
			}
			d = "read -> " + strings.Join(kv, ", ")
		}
	case "exists":
		d = fmt.Sprintf("listed -> %t", out.Exists != nil && *out.Exists)
	case "members":
		d = fmt.Sprintf("members -> %v", out.Members)
	case "kvget":
		if out.Value == nil {
			d = "get -> none"
		} else {
			d = fmt.Sprintf("get -> %q", *out.Value)
		}
	default:
		d = in.Kind
	}
	if in.Unknown {
		d += " (outcome unknown)"
	}
	if in.Desc != "" {
		d += " [" + in.Desc + "]"
	}
	return d
}
