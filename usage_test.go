package sessionstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/vfs"
)

var usageModels = []string{"", "model-a", "model-b"}

// usageOracle adds up what the events Tree and FullPath return report:
// the oracle Usage is checked against. Messages without a model count
// under model.
type usageOracle map[string]Usage

func (o usageOracle) add(t *testing.T, ev Event, model string) {
	t.Helper()
	if ev.Kind != KindMessage {
		return
	}
	var m Message
	require.NoError(t, ev.Decode(&m))
	if m.Usage == nil {
		return
	}
	name := m.Model
	if name == "" {
		name = model
	}
	u := o[name]
	u.InputTokens += m.Usage.InputTokens
	u.OutputTokens += m.Usage.OutputTokens
	u.CacheReadTokens += m.Usage.CacheReadTokens
	u.CacheWriteTokens += m.Usage.CacheWriteTokens
	o[name] = u
}

// byModel is totals' ByModel as the oracle's form, models with no tokens
// left out.
func byModel(tot UsageTotals) usageOracle {
	o := usageOracle{}
	for _, m := range tot.ByModel {
		if m.Usage != (Usage{}) {
			o[m.Model] = m.Usage
		}
	}
	return o
}

func (o usageOracle) trimmed() usageOracle {
	out := usageOracle{}
	for k, v := range o {
		if v != (Usage{}) {
			out[k] = v
		}
	}
	return out
}

// sessionOracle is the usage of every event of session, each once: the
// union of FullPath over every leaf of its Tree; it also returns the
// leaves' oracles.
func sessionOracle(t *testing.T, s *Store, id uuid.UUID) (usageOracle, map[uuid.UUID]usageOracle) {
	t.Helper()
	ctx := context.Background()
	meta, err := s.Meta(ctx, id)
	require.NoError(t, err)
	nodes, err := s.Tree(ctx, id)
	require.NoError(t, err)
	hasChild := map[uuid.UUID]bool{}
	for _, n := range nodes {
		hasChild[n.ParentID] = true
	}
	seen := map[uuid.UUID]bool{}
	all := usageOracle{}
	leaves := map[uuid.UUID]usageOracle{}
	for _, n := range nodes {
		if hasChild[n.ID] {
			continue
		}
		path, err := s.FullPath(ctx, id, n.ID)
		require.NoError(t, err)
		leaf := usageOracle{}
		for _, ev := range path {
			leaf.add(t, ev, meta.Model)
			if !seen[ev.ID] {
				seen[ev.ID] = true
				all.add(t, ev, meta.Model)
			}
		}
		leaves[n.ID] = leaf.trimmed()
	}
	require.Len(t, seen, len(nodes), "every event is on some branch")
	return all.trimmed(), leaves
}

// usageWorld is a randomized workload: a session with subagents (two
// levels), messages with and without usage on random branches, tool
// results, flushes, session closes, store reopens and power cuts.
type usageWorld struct {
	t        *testing.T
	rng      *rand.Rand
	m        *vfs.MemFS
	s        *Store
	opts     Options
	sessions []uuid.UUID // [0] is the top-level session
	parent   map[uuid.UUID]uuid.UUID
}

func (w *usageWorld) open() {
	w.s = openMem(w.t, w.m, w.opts)
}

// crash cuts the power after a random number of the next mutating
// operations while appending, then reopens a crash clone.
func (w *usageWorld) crash() {
	ctx := context.Background()
	left := 1 + w.rng.IntN(12)
	w.m.SetFault(func(op vfs.Op, _ string) error {
		if !vfs.Mutating(op) {
			return nil
		}
		if left--; left <= 0 {
			return vfs.ErrPowerLoss
		}
		return nil
	})
	for range 20 {
		if err := w.step(ctx, false); err != nil {
			break
		}
	}
	w.m.PowerOff()
	_ = w.s.Close() // the power is off: errors expected
	mode := vfs.KeepSynced
	if w.rng.IntN(2) == 0 {
		mode = vfs.KeepAll
	}
	w.m = w.m.CrashClone(mode, w.rng.Uint64())
	w.open()
}

// step makes one random change; with strict an error fails the test.
func (w *usageWorld) step(ctx context.Context, strict bool) error {
	id := w.sessions[w.rng.IntN(len(w.sessions))]
	var err error
	switch r := w.rng.IntN(20); {
	case r < 10:
		msg := Message{Content: "answer", Model: usageModels[w.rng.IntN(len(usageModels))]}
		if w.rng.IntN(4) > 0 {
			msg.Usage = &Usage{InputTokens: w.rng.Int64N(5000), OutputTokens: w.rng.Int64N(900),
				CacheReadTokens: w.rng.Int64N(3000), CacheWriteTokens: w.rng.Int64N(200)}
		}
		_, err = w.s.Append(ctx, id, NewEvent(KindMessage, RoleAssistant, msg))
	case r < 12:
		_, err = w.s.Append(ctx, id, NewEvent(KindToolResult, RoleTool, ToolResult{CallID: "c", Output: `"usage": not a message`}))
	case r < 15:
		nodes, terr := w.s.Tree(ctx, id)
		if terr != nil {
			err = terr
		} else if len(nodes) > 0 {
			err = w.s.Branch(ctx, id, nodes[w.rng.IntN(len(nodes))].ID)
		}
	case r < 16:
		err = w.s.Flush(ctx, id)
	case r < 17:
		err = w.s.CloseSession(ctx, id)
	case r < 18 && len(w.sessions) < 5:
		parent := w.sessions[w.rng.IntN(len(w.sessions))]
		var m Meta
		m, err = w.s.Create(ctx, Meta{ParentSession: parent, Model: "model-sub"})
		if err == nil {
			w.sessions = append(w.sessions, m.ID)
			w.parent[m.ID] = parent
		}
	default:
		_, err = w.s.Usage(ctx, id, UsageScope{Kind: UsageSession})
	}
	if strict {
		require.NoError(w.t, err)
	}
	return err
}

// check compares Usage of every scope of every session with the oracle.
func (w *usageWorld) check(when string) {
	t := w.t
	ctx := context.Background()
	// Sessions a crash left uncreated are dropped.
	var live []uuid.UUID
	for _, id := range w.sessions {
		if _, err := w.s.Meta(ctx, id); errors.Is(err, ErrNotFound) {
			continue
		}
		live = append(live, id)
	}
	w.sessions = live
	own := map[uuid.UUID]usageOracle{}
	for _, id := range w.sessions {
		all, leaves := sessionOracle(t, w.s, id)
		own[id] = all
		got, err := w.s.Usage(ctx, id, UsageScope{Kind: UsageSession})
		require.NoError(t, err)
		assert.Equal(t, all, byModel(got), "%s: session %s", when, id)
		for leaf, want := range leaves {
			got, err := w.s.Usage(ctx, id, UsageScope{Kind: UsageBranch, Leaf: leaf})
			require.NoError(t, err)
			assert.Equal(t, want, byModel(got), "%s: session %s branch %s", when, id, leaf)
		}
	}
	for _, id := range w.sessions {
		want := usageOracle{}
		for _, other := range w.sessions {
			for at := other; at != uuid.Nil; at = w.parent[at] {
				if at == id {
					for k, v := range own[other] {
						u := want[k]
						u.InputTokens += v.InputTokens
						u.OutputTokens += v.OutputTokens
						u.CacheReadTokens += v.CacheReadTokens
						u.CacheWriteTokens += v.CacheWriteTokens
						want[k] = u
					}
					break
				}
			}
		}
		got, err := w.s.Usage(ctx, id, UsageScope{Kind: UsageTree})
		require.NoError(t, err)
		assert.Equal(t, want.trimmed(), byModel(got), "%s: tree of %s", when, id)
	}
}

// checkRecorded closes the store cleanly, reopens it and checks that the
// totals List reports (session.json, through the catalogue) are the exact
// ones.
func (w *usageWorld) checkRecorded(when string) {
	t := w.t
	ctx := context.Background()
	require.NoError(t, w.s.Close())
	w.open()
	metas, err := w.s.List(ctx)
	require.NoError(t, err)
	for _, m := range metas {
		want, _ := sessionOracle(t, w.s, m.ID)
		assert.Equal(t, want, byModel(m.Usage.Totals(m.Model, nil)), "%s: List's recorded totals of %s", when, m.ID)
	}
}

func TestUsageRandomized(t *testing.T) {
	seeds := testSize(t, "SESSIONSTORE_USAGE_SEEDS", 6, 30)
	for seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			ctx := context.Background()
			w := &usageWorld{t: t, rng: rand.New(rand.NewPCG(uint64(seed), 36)), m: vfs.NewMemFS(),
				opts: Options{ChunkSize: 4096, BlobThreshold: 700}, parent: map[uuid.UUID]uuid.UUID{}}
			w.open()
			top, err := w.s.Create(ctx, Meta{Model: "model-top"})
			require.NoError(t, err)
			w.sessions = []uuid.UUID{top.ID}
			// A clean close first, so a crash never loses the top session.
			require.NoError(t, w.s.Close())
			w.open()
			for round := range 6 {
				for range 25 {
					w.step(ctx, true)
				}
				w.check(fmt.Sprintf("round %d", round))
				switch round % 3 {
				case 0:
					w.crash()
					w.check(fmt.Sprintf("round %d after a power cut", round))
				case 1:
					w.checkRecorded(fmt.Sprintf("round %d", round))
				default:
					require.NoError(t, w.s.Close())
					w.open()
				}
			}
			w.checkRecorded("the end")
			require.NoError(t, w.s.Close())
		})
	}
}
