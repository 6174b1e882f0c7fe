//go:build linux

package remote_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/remote"
)

// The writer child of the tests with real processes (process_test.go).
// The parent starts the test binary again with procChildEnv set to a
// procChild in JSON; init runs the child then, before the tests' TestMain,
// and exits. The child opens a Store on its own directory, kept in a
// bucket of the parent's versitygw, and reports on stdout, one line per
// fact, each written with one write(2) after the fact:
//
//	S <id>               it created session <id> (Create returned nil)
//	O                    the Store is open; the session's Load starts
//	V <id> <text> <sha>  an event Load returned, in order: its text and the
//	                     SHA-256 of its record, in hex
//	H <id>               Head, after Load
//	N <n>                the number of nodes of Tree
//	F ok | F <problems>  Verify's report (with procChild.Verify)
//	L <n>                the end of the load report: Load returned n events
//	T <text> <sha>       an event is about to be appended (before the call)
//	A <id> <text> <sha>  the event was acknowledged: its Append or
//	                     AppendBatch returned nil
//	E <kind> <message>   a call failed; kind is fenced, locked, remote or
//	                     other (see procErrKind)
//	C                    the Store closed without an error
//
// After an error of an append the child tries one more append, reporting
// it the same way (T, then A or E), and exits with status 0; every other
// error ends it at once, also with status 0 (the parent reads the E line).

// procChildEnv names the environment variable that makes the test binary a
// writer child.
const procChildEnv = "SESSIONSTORE_REMOTE_PROC_CHILD"

// Options of every Store of these tests: chunks small enough to be sealed
// and uploaded every few dozen events, and a blob threshold that makes
// about one record in ten a blob.
const (
	procChunkSize     = 16 << 10
	procBlobThreshold = 4 << 10
	procLeaseTime     = 2 * time.Second
	procRemoteTimeout = 20 * time.Second
	// procChildTimeout bounds everything a child does (its context): a
	// stuck child ends with an E line instead of hanging.
	procChildTimeout = 2 * time.Minute
)

// procChild is what a child does.
type procChild struct {
	Dir string // the Store's root
	// The bucket, on the parent's versitygw.
	Endpoint, Region, Bucket, AccessKey, SecretKey string
	// Session is the session to continue (loading and reporting it
	// first); empty makes a new one.
	Session string
	Prefix  string // the events' texts are Prefix-0, Prefix-1, ...
	Seed    uint64 // of the workload: batch sizes, record sizes, Append or AppendBatch
	Wait    bool   // Options.WaitForLock
	Verify  bool   // report Verify after Load
	// Max, if positive, makes the child stop appending once it has
	// appended that many events, and close the Store.
	Max int
	// Local acknowledges appends after the local sync
	// (Options.RemoteDurability DurableLocal).
	Local bool
}

func init() {
	if v := os.Getenv(procChildEnv); v != "" {
		var c procChild
		if err := json.Unmarshal([]byte(v), &c); err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", procChildEnv, err)
			os.Exit(2)
		}
		c.run()
		os.Exit(0)
	}
}

// procLine writes one line of the report with one write(2): a pipe takes
// it whole (it is shorter than PIPE_BUF) or not at all.
func procLine(format string, args ...any) {
	_, _ = os.Stdout.WriteString(fmt.Sprintf(format, args...) + "\n")
}

// procErrKind classifies an error for the E line.
func procErrKind(err error) string {
	switch {
	case errors.Is(err, sessionstore.ErrFenced):
		return "fenced"
	case errors.Is(err, sessionstore.ErrLocked):
		return "locked"
	case errors.Is(err, sessionstore.ErrRemote):
		return "remote"
	}
	return "other"
}

func procFail(what string, err error) {
	msg := strings.ReplaceAll(fmt.Sprintf("%s: %v", what, err), "\n", " | ")
	if len(msg) > 2000 {
		msg = msg[:2000] + "..."
	}
	procLine("E %s %s", procErrKind(err), msg)
}

// procRecord is the record of every event of these tests.
type procRecord struct {
	Text string `json:"text"`
	Pad  string `json:"pad"`
}

// procEventFor returns an event with text and a pad of a size drawn from
// rng: mostly small records, some of a few KiB, and about one in ten
// larger than procBlobThreshold, hence a blob. The record is compact JSON,
// as the store keeps it, so its SHA-256 is that of what Load returns.
func procEventFor(rng *rand.Rand, text string) (sessionstore.Event, string) {
	var n int
	switch r := rng.IntN(10); {
	case r < 6:
		n = 20 + rng.IntN(400)
	case r < 9:
		n = 1000 + rng.IntN(2500)
	default:
		n = procBlobThreshold + 1000 + rng.IntN(30<<10)
	}
	pad := make([]byte, n)
	for i := range pad {
		pad[i] = 'a' + byte(rng.IntN(26))
	}
	rec, err := json.Marshal(procRecord{Text: text, Pad: string(pad)})
	if err != nil {
		panic(err)
	}
	return sessionstore.Event{Kind: sessionstore.KindCustom, Record: rec}, procSum(rec)
}

func procSum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func (c *procChild) run() {
	ctx, cancel := context.WithTimeout(context.Background(), procChildTimeout)
	defer cancel()
	b, err := remote.OpenS3(ctx, remote.S3Config{Endpoint: c.Endpoint, Region: c.Region, Bucket: c.Bucket, AccessKey: c.AccessKey, SecretKey: c.SecretKey})
	if err != nil {
		procFail("open bucket", err)
		return
	}
	defer b.Close()
	s, err := sessionstore.Open(c.Dir, &sessionstore.Options{
		Remote:        remote.New(b),
		LeaseTime:     procLeaseTime,
		RemoteTimeout: procRemoteTimeout,
		WaitForLock:   c.Wait,
		ChunkSize:     procChunkSize,
		BlobThreshold: procBlobThreshold,
		RemoteDurability: map[bool]sessionstore.Durability{
			false: sessionstore.DurableRemote, true: sessionstore.DurableLocal,
		}[c.Local],
	})
	if err != nil {
		procFail("open store", err)
		return
	}
	var id uuid.UUID
	if c.Session == "" {
		m, err := s.Create(ctx, sessionstore.Meta{Name: c.Prefix})
		if err != nil {
			procFail("create", err)
			return
		}
		id = m.ID
		procLine("S %s", id)
	} else {
		if id, err = uuid.Parse(c.Session); err != nil {
			procFail("session id", err)
			return
		}
		procLine("O")
		if !c.report(ctx, s, id) {
			return
		}
	}

	rng := rand.New(rand.NewPCG(c.Seed, 0x7772697465))
	failed := false
	for n := 0; c.Max <= 0 || n < c.Max; {
		k := 1
		if !failed && rng.IntN(3) == 0 {
			k = 2 + rng.IntN(4)
		}
		if c.Max > 0 {
			k = min(k, c.Max-n)
		}
		evs := make([]sessionstore.Event, k)
		texts := make([]string, k)
		sums := make([]string, k)
		for i := range k {
			texts[i] = fmt.Sprintf("%s-%d", c.Prefix, n+i)
			evs[i], sums[i] = procEventFor(rng, texts[i])
			procLine("T %s %s", texts[i], sums[i])
		}
		var got []sessionstore.Event
		if k == 1 && rng.IntN(2) == 0 {
			var ev sessionstore.Event
			if ev, err = s.Append(ctx, id, evs[0]); err == nil {
				got = []sessionstore.Event{ev}
			}
		} else {
			got, err = s.AppendBatch(ctx, id, evs...)
		}
		if err != nil {
			procFail("append", err)
			if failed {
				return
			}
			failed = true
			n += k
			continue
		}
		for i, ev := range got {
			procLine("A %s %s %s", ev.ID, texts[i], sums[i])
		}
		if failed {
			return // the one append after an error succeeded: reported
		}
		n += k
	}
	if failed {
		return // Max reached by the failed append: nothing more to try
	}
	if err := s.Close(); err != nil {
		procFail("close", err)
		return
	}
	procLine("C")
}

// report loads session id and reports what it holds (V, H, N, F and L
// lines), returning false after an error.
func (c *procChild) report(ctx context.Context, s *sessionstore.Store, id uuid.UUID) bool {
	evs, err := s.Load(ctx, id)
	if err != nil {
		procFail("load", err)
		return false
	}
	for _, ev := range evs {
		var r procRecord
		if err := json.Unmarshal(ev.Record, &r); err != nil {
			procFail("record of "+ev.ID.String(), err)
			return false
		}
		procLine("V %s %s %s", ev.ID, r.Text, procSum(ev.Record))
	}
	head, err := s.Head(ctx, id)
	if err != nil {
		procFail("head", err)
		return false
	}
	procLine("H %s", head)
	nodes, err := s.Tree(ctx, id)
	if err != nil {
		procFail("tree", err)
		return false
	}
	procLine("N %d", len(nodes))
	if c.Verify {
		rep, err := s.Verify(ctx, id)
		if err != nil {
			procFail("verify", err)
			return false
		}
		if rep.OK() && len(rep.Repairs) == 0 {
			procLine("F ok")
		} else {
			procLine("F %s", strings.ReplaceAll(fmt.Sprintf("problems %v, repairs %v", rep.Problems, rep.Repairs), "\n", " | "))
		}
	}
	procLine("L %d", len(evs))
	return true
}
