package raft

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"sort"
	"testing"

	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/command"
	"github.com/shaledb/shale/hlc"
	"github.com/shaledb/shale/mvcc"
	"github.com/shaledb/shale/raft/keys"
	"github.com/shaledb/shale/storage"
)

// TestApplyIsDeterministic applies one random sequence of commands to two
// replicas of the same range on separate engines, cutting it into batches
// of different sizes on each (so the overlay of writes staged in one batch
// is exercised differently), and checks that:
//   - both replicas return the same result for every entry and end with
//     byte-identical replicated state (range-local keys and data);
//   - the results and the data agree with a model (a Go map) of the
//     commands' semantics, including deduplication of retried requests.
//
// It drives the apply step directly, without network or timers, so it is
// deterministic for a given seed.
func TestApplyIsDeterministic(t *testing.T) {
	for seed := uint64(1); seed <= 4; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { testApplyDeterministic(t, seed) })
	}
}

func testApplyDeterministic(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 99))
	nodes := []*kvpb.NodeDescriptor{{NodeId: 1, Address: "a:1"}, {NodeId: 2, Address: "a:2"}, {NodeId: 3, Address: "a:3"}}
	a := applyOnlyReplica(t, 1, nodes)
	b := applyOnlyReplica(t, 2, nodes)

	m := newModel()
	var ents []*pb.Entry
	var want []command.Result
	idx := uint64(initialIndex)
	type sent struct {
		cmd *command.Command
		res command.Result
	}
	var history []sent
	for i := 0; i < 1500; i++ {
		var cmd *command.Command
		if len(history) > 0 && rng.IntN(10) == 0 {
			// A retry of an earlier deduplicated request: same client and
			// seq, and it must get the first result back.
			h := history[rng.IntN(len(history))]
			if h.cmd.ClientID != 0 {
				c := *h.cmd
				c.ProposalID = uint64(i + 1000000)
				cmd = &c
			}
		}
		if cmd == nil {
			cmd = randomCommand(rng, uint64(i))
		}
		res := m.apply(cmd)
		if cmd.ClientID != 0 && res.Code == command.CodeOK {
			history = append(history, sent{cmd, res})
		}
		data, err := cmd.Encode(nil)
		if err != nil {
			t.Fatal(err)
		}
		idx++
		ents = append(ents, &pb.Entry{Index: new(idx), Term: new(uint64(initialTerm)), Type: pb.EntryNormal.Enum(), Data: data})
		want = append(want, res)
	}

	gotA := applyInChunks(t, a, ents, func() int { return 1 + rng.IntN(3) })
	gotB := applyInChunks(t, b, ents, func() int { return 1 + rng.IntN(64) })
	for i := range ents {
		if !sameResult(gotA[i], gotB[i]) {
			t.Fatalf("entry %d: replicas disagree: %+v vs %+v", i, gotA[i], gotB[i])
		}
		if !sameResult(gotA[i], want[i]) {
			t.Fatalf("entry %d: result %+v, model says %+v", i, gotA[i], want[i])
		}
	}
	desc := a.desc
	spans := keys.ReplicatedSpans(desc)
	dumpA, dumpB := dumpSpans(t, a.store.cfg.Engine, spans), dumpSpans(t, b.store.cfg.Engine, spans)
	if !bytes.Equal(dumpA, dumpB) {
		t.Fatal("the replicas' replicated state differs")
	}
	// The data agrees with the model.
	userDump := dumpUser(t, a.store.cfg.Engine)
	if len(userDump) != len(m.kv) {
		t.Fatalf("engine holds %d user keys, model %d", len(userDump), len(m.kv))
	}
	for k, v := range m.kv {
		if userDump[k] != v {
			t.Fatalf("key %q = %q, model %q", k, userDump[k], v)
		}
	}
	if ap := a.ls.Applied(); ap.Index != idx {
		t.Fatalf("applied index %d, want %d", ap.Index, idx)
	}
}

// applyOnlyReplica returns node nodeID's replica of range 2 in a store that
// is never started: the test calls the apply step itself.
func applyOnlyReplica(t testing.TB, nodeID uint64, nodes []*kvpb.NodeDescriptor) *Replica {
	t.Helper()
	db, err := storage.Open(filepath.Join(t.TempDir(), "db"), keys.WithUserVersions(nil))
	if err != nil {
		t.Fatal(err)
	}
	if err := Bootstrap(db, "c", nodeID, nodes); err != nil {
		t.Fatal(err)
	}
	s, err := NewStore(Config{Engine: db, StateMachines: rangeStateMachines(db), NodeID: nodeID, ClusterID: "c", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Stop()
		db.Close()
	})
	r, err := s.Replica(keys.FirstUserRangeID)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func applyInChunks(t *testing.T, r *Replica, ents []*pb.Entry, size func() int) []command.Result {
	t.Helper()
	r.raftMu.Lock()
	defer r.raftMu.Unlock()
	var out []command.Result
	for i := 0; i < len(ents); {
		n := min(size(), len(ents)-i)
		chunk := ents[i : i+n]
		// Register every entry as this node's proposal to collect results.
		for _, e := range chunk {
			var c command.Command
			if err := command.Decode(e.GetData(), &c); err != nil {
				t.Fatal(err)
			}
			c.ProposerNode = r.store.cfg.NodeID
			data, _ := c.Encode(nil)
			e.Data = data
			r.proposals[c.ProposalID] = &proposal{id: c.ProposalID, done: make(chan proposalResult, 1)}
		}
		acks, _, err := r.applyCommittedLocked(chunk)
		if err != nil {
			t.Fatal(err)
		}
		if len(acks) != n {
			t.Fatalf("%d acks for %d entries", len(acks), n)
		}
		for _, a := range acks {
			out = append(out, a.res)
		}
		i += n
	}
	return out
}

func sameResult(a, b command.Result) bool {
	return a.Code == b.Code && a.Succeeded == b.Succeeded && a.Found == b.Found && bytes.Equal(a.Value, b.Value)
}

func dumpSpans(t *testing.T, db *storage.DB, spans []keys.Span) []byte {
	var out []byte
	for _, sp := range spans {
		it, err := db.NewIter(&storage.IterOptions{LowerBound: sp.Start, UpperBound: sp.End})
		if err != nil {
			t.Fatal(err)
		}
		for ok := it.First(); ok; ok = it.Next() {
			out = append(out, it.UnsafeKey()...)
			out = append(out, 0xff)
			out = append(out, it.UnsafeValue()...)
			out = append(out, 0xfe)
		}
		if err := it.Error(); err != nil {
			t.Fatal(err)
		}
		it.Close()
	}
	return out
}

func dumpUser(t *testing.T, db *storage.DB) map[string]string {
	kvs, _, err := keys.UserKeyspace.Scan(db, nil, nil, hlc.MaxTimestamp, mvcc.ScanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, kv := range kvs {
		m[string(kv.Key)] = string(kv.Value)
	}
	return m
}

// randomCommand returns a random write over a small key space (so that
// operations collide), sometimes with a client ID for deduplication.
func randomCommand(rng *rand.Rand, i uint64) *command.Command {
	key := func() []byte { return []byte(fmt.Sprintf("k%02d", rng.IntN(40))) }
	val := func() []byte { return []byte(fmt.Sprintf("v%d", rng.IntN(1000))) }
	mut := func() command.Mutation {
		switch rng.IntN(5) {
		case 0:
			return command.Mutation{Kind: command.KindDelete, Key: key()}
		case 1:
			a, b := key(), key()
			if bytes.Compare(a, b) > 0 {
				a, b = b, a
			}
			return command.Mutation{Kind: command.KindDeleteRange, Key: a, Value: b}
		default:
			return command.Mutation{Kind: command.KindPut, Key: key(), Value: val()}
		}
	}
	c := &command.Command{}
	c.ProposalID = i + 1
	c.ProposerTime = int64(1000 + i)
	if rng.IntN(2) == 0 {
		c.ClientID = 1 + uint64(rng.IntN(3))
		c.RequestSeq = i
	}
	switch rng.IntN(4) {
	case 0:
		c.Kind = command.KindCAS
		c.CAS = command.CAS{Key: key(), ExpectAbsent: rng.IntN(4) == 0, Expected: val(), Delete: rng.IntN(4) == 0, NewValue: val()}
	case 1:
		c.Kind = command.KindBatch
		for n := 1 + rng.IntN(4); n > 0; n-- {
			c.Mutations = append(c.Mutations, mut())
		}
	default:
		mt := mut()
		c.Kind = mt.Kind
		c.Mutations = []command.Mutation{mt}
	}
	return c
}

// model is the reference semantics of the write commands.
type model struct {
	kv    map[string]string
	dedup map[[2]uint64]command.Result
}

func newModel() *model {
	return &model{kv: map[string]string{}, dedup: map[[2]uint64]command.Result{}}
}

func (m *model) apply(c *command.Command) command.Result {
	if c.ClientID != 0 {
		if r, ok := m.dedup[[2]uint64{c.ClientID, c.RequestSeq}]; ok {
			return r
		}
	}
	var res command.Result
	switch c.Kind {
	case command.KindCAS:
		cur, found := m.kv[string(c.CAS.Key)]
		res.Found = found
		if found {
			res.Value = []byte(cur)
		}
		if (c.CAS.ExpectAbsent && !found) || (!c.CAS.ExpectAbsent && found && cur == string(c.CAS.Expected)) {
			res.Succeeded = true
			if c.CAS.Delete {
				delete(m.kv, string(c.CAS.Key))
			} else {
				m.kv[string(c.CAS.Key)] = string(c.CAS.NewValue)
			}
		}
	default:
		for _, mt := range c.Mutations {
			switch mt.Kind {
			case command.KindPut:
				m.kv[string(mt.Key)] = string(mt.Value)
			case command.KindDelete:
				delete(m.kv, string(mt.Key))
			case command.KindDeleteRange:
				var ks []string
				for k := range m.kv {
					if k >= string(mt.Key) && k < string(mt.Value) {
						ks = append(ks, k)
					}
				}
				sort.Strings(ks)
				for _, k := range ks {
					delete(m.kv, k)
				}
			}
		}
	}
	if c.ClientID != 0 {
		m.dedup[[2]uint64{c.ClientID, c.RequestSeq}] = res
	}
	return res
}
