package commit_test

import (
	"fmt"
	"io"
	"log/slog"
	"sync"

	"github.com/sessionstore/sessionstore/internal/chunkwriter"
	"github.com/sessionstore/sessionstore/internal/commit"
	"github.com/sessionstore/sessionstore/internal/eventline"
)

// memChunk is a chunk in memory: what is written, and what a sync made
// durable.
type memChunk struct{ data, synced []byte }

func (c *memChunk) WriteAt(b []byte, off int64) error {
	c.data = append(c.data[:off], b...)
	return nil
}
func (c *memChunk) Sync() error  { c.synced = append(c.synced[:0], c.data...); return nil }
func (c *memChunk) Trim(int64)   {}
func (c *memChunk) Close() error { return nil }

type memFiles struct{ c *memChunk }

func (f memFiles) CreateChunk(uint32) (chunkwriter.Chunk, error)      { return f.c, nil }
func (f memFiles) OpenChunk(uint32, int64) (chunkwriter.Chunk, error) { return f.c, nil }
func (f memFiles) SealChunk(uint32, []eventline.Entry) error          { return nil }

// printLog writes and syncs the chunk, and prints what is published.
type printLog struct{ c *memChunk }

func (printLog) Stopped() error { return nil }
func (printLog) Write(c chunkwriter.Chunk, data []byte, off int64) (func() error, error, error, bool) {
	if err := c.WriteAt(data, off); err != nil {
		return nil, err, nil, false
	}
	return nil, nil, c.Sync(), false
}
func (printLog) Journaled() {}
func (l printLog) Publish(rs []string) {
	fmt.Printf("published %q; the chunk holds %q durably\n", rs, l.c.synced)
}
func (printLog) Dropped([]string) {}
func (printLog) Stop(error)       {}

// An append: its line is queued in the chunk writer and its record added
// to the pipeline, with the session's mutex held; Commit writes and
// syncs the group the record joined, publishes it and returns with the
// mutex released.
func Example() {
	var mu sync.Mutex
	c := &memChunk{}
	w := chunkwriter.New(chunkwriter.Config{Files: memFiles{c}, Dir: "chunks", MaxSize: 1 << 20, Mu: &mu,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Embed: func(uint32) []eventline.Entry { return nil }})
	p := commit.New[string](&mu, &w, printLog{c})

	mu.Lock()
	if err := w.Rotate(); err != nil { // start chunk 0
		panic(err)
	}
	w.Enqueue([]byte("first\n"))
	p.Add("first")
	err := p.Commit(p.Join(1)) // unlocks mu
	fmt.Println("commit:", err)
	// Output:
	// published ["first"]; the chunk holds "first\n" durably
	// commit: <nil>
}
