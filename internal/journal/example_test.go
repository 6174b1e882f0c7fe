package journal_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/sessionstore/sessionstore/internal/journal"
	"github.com/sessionstore/sessionstore/internal/vfs"
)

// A process commits a write through its journal and dies before the
// file is synced; another process replays the dead owner's journal.
func Example() {
	fsys := vfs.NewMemFS()
	root := "/store"
	chunk := filepath.Join(root, "sessions", "s1", "chunk")
	fsys.MkdirAll(filepath.Dir(chunk), 0o755)
	f, _ := fsys.OpenFile(chunk, os.O_RDWR|os.O_CREATE, 0o644)
	f.Close()
	for _, d := range []string{"/", root, filepath.Join(root, "sessions"), filepath.Dir(chunk)} {
		fsys.SyncDir(d)
	}

	w, err := journal.Create(fsys, root, &journal.Options{Size: journal.MinSize})
	if err != nil {
		fmt.Println(err)
		return
	}
	lsn, err := w.Commit(context.Background(), []journal.Record{
		{Op: journal.OpWrite, Path: "sessions/s1/chunk", Offset: 0, Data: []byte("event 1\n")},
	}, nil) // nil apply: the journal writes the record into the file, unsynced
	fmt.Println("committed lsn", lsn, err)

	// Power loss: the file's unsynced write is gone, the journal's is not.
	after := fsys.CrashClone(vfs.KeepSynced, 1)
	data, _ := vfs.ReadFile(after, chunk)
	fmt.Printf("after the crash: %q\n", data)

	alive, _ := journal.Alive(after, root, w.Owner())
	fmt.Println("owner alive:", alive)
	res, err := journal.Replay(after, root, w.Owner(), "sessions/s1/")
	fmt.Println("replayed", res.Records, "record(s) into", res.Files, err)
	data, _ = vfs.ReadFile(after, chunk)
	fmt.Printf("after the replay: %q\n", data)
	// Output:
	// committed lsn 1 <nil>
	// after the crash: ""
	// owner alive: false
	// replayed 1 record(s) into [sessions/s1/chunk] <nil>
	// after the replay: "event 1\n"
}

// A session's JOURNAL marker names the journal its records go through;
// the writer dies with the machine, and the next process to take the
// session over applies the dead journal's records to it before writing.
func ExampleTakeOver() {
	fsys := vfs.NewMemFS()
	root := "/store"
	dir := filepath.Join(root, "sessions", "s1")
	fsys.MkdirAll(dir, 0o755)
	f, _ := fsys.OpenFile(filepath.Join(dir, "chunk"), os.O_RDWR|os.O_CREATE, 0o644)
	f.Close()
	for _, d := range []string{"/", root, filepath.Dir(dir), dir} {
		fsys.SyncDir(d)
	}

	w, _ := journal.Create(fsys, root, &journal.Options{Size: journal.MinSize})
	// The marker is durable before the first record it covers.
	if err := journal.WriteMarker(fsys, dir, w.Owner(), 0o644); err != nil {
		fmt.Println(err)
		return
	}
	w.Commit(context.Background(), []journal.Record{
		{Op: journal.OpWrite, Path: "sessions/s1/chunk", Offset: 0, Data: []byte("event 1\n")},
	}, nil)

	after := journal.Overlay(fsys, root, dir)
	fmt.Println("an overlay in the writer's boot:", after != nil)

	crashed := fsys.CrashClone(vfs.KeepSynced, 1) // the power goes: another boot
	owner, _ := journal.ReadMarker(crashed, dir)
	fmt.Println("the marker names the journal:", owner == w.Owner())
	ov := journal.Overlay(crashed, root, dir)
	rf, _ := ov.OpenFile(filepath.Join(dir, "chunk"), os.O_RDONLY, 0)
	info, _ := rf.Stat()
	data := make([]byte, info.Size())
	rf.ReadAt(data, 0)
	rf.Close()
	fmt.Printf("a reader sees through the overlay: %q\n", data)

	mine, err := journal.TakeOver(context.Background(), crashed, root, dir, "", 0o644, &journal.DeadLogs{})
	fmt.Printf("taken over: %q %v\n", mine, err)
	data, _ = vfs.ReadFile(crashed, filepath.Join(dir, "chunk"))
	owner, _ = journal.ReadMarker(crashed, dir)
	fmt.Printf("the chunk holds %q; the marker names %q\n", data, owner)
	// Output:
	// an overlay in the writer's boot: false
	// the marker names the journal: true
	// a reader sees through the overlay: "event 1\n"
	// taken over: "" <nil>
	// the chunk holds "event 1\n"; the marker names ""
}
