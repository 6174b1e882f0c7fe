package remote_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"gocloud.dev/blob/memblob"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/remote"
)

// A latency-bound harness acknowledges appends after the local sync
// (DurableLocal): each Append returns without waiting for the object
// store, whose Creates follow, at most Options.RemoteWindow commit groups
// behind. Close waits for them, so another Store, on another machine's
// directory, then loads every event from the bucket. Until they are
// stored, a lost disk or a takeover by another Store loses them (see
// sessionstore.DurableLocal); a crash does not: the next open in the same
// directory stores them first.
func Example_durableLocal() {
	ctx := context.Background()
	bucket := memblob.OpenBucket(nil)
	defer bucket.Close()
	obj := remote.New(bucket)
	tmp := func() string {
		dir, err := os.MkdirTemp("", "sessionstore-example-")
		if err != nil {
			log.Fatal(err)
		}
		return dir
	}
	workerDir, otherDir := tmp(), tmp()
	defer os.RemoveAll(workerDir)
	defer os.RemoveAll(otherDir)

	worker, err := sessionstore.Open(workerDir, &sessionstore.Options{Remote: obj, RemoteDurability: sessionstore.DurableLocal})
	if err != nil {
		log.Fatal(err)
	}
	meta, err := worker.Create(ctx, sessionstore.Meta{Name: "fix the build"})
	if err != nil {
		log.Fatal(err)
	}
	for _, text := range []string{"the build fails", "run go vet", "a missing import"} {
		if _, err := worker.Append(ctx, meta.ID, sessionstore.UserText(text)); err != nil {
			log.Fatal(err)
		}
	}
	if err := worker.Close(); err != nil { // waits for every Create
		log.Fatal(err)
	}

	other, err := sessionstore.Open(otherDir, &sessionstore.Options{Remote: obj})
	if err != nil {
		log.Fatal(err)
	}
	defer other.Close()
	evs, err := other.Load(ctx, meta.ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("another Store loads", len(evs), "events")
	// Output:
	// another Store loads 3 events
}
