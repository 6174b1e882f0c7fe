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
