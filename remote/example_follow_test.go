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

// A dashboard follows a session that a worker writes to the bucket: a
// read-only Store with the same Remote, in a directory of its own, sees
// each event once the worker's Append returned, and its subscription
// delivers the worker's appends. It writes nothing to the bucket.
func Example_follower() {
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
	workerDir, dashDir := tmp(), tmp()
	defer os.RemoveAll(workerDir)
	defer os.RemoveAll(dashDir)

	worker, err := sessionstore.Open(workerDir, &sessionstore.Options{Remote: obj})
	if err != nil {
		log.Fatal(err)
	}
	defer worker.Close()
	meta, err := worker.Create(ctx, sessionstore.Meta{Name: "fix the build"})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := worker.Append(ctx, meta.ID, sessionstore.UserText("the build fails")); err != nil {
		log.Fatal(err)
	}

	dash, err := sessionstore.Open(dashDir, &sessionstore.Options{Remote: obj, ReadOnly: true})
	if err != nil {
		log.Fatal(err)
	}
	defer dash.Close()
	evs, err := dash.Load(ctx, meta.ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("the dashboard sees", len(evs), "event")

	sub, err := dash.Subscribe(ctx, meta.ID)
	if err != nil {
		log.Fatal(err)
	}
	defer sub.Close()
	if _, err := worker.Append(ctx, meta.ID, sessionstore.AssistantText("fixed: a missing import")); err != nil {
		log.Fatal(err)
	}
	u := <-sub.C // within a FollowInterval (100 ms) or so
	msg, _ := u.Event.Message()
	fmt.Println("live:", msg.Content)

	_, err = dash.Append(ctx, meta.ID, sessionstore.UserText("from the dashboard"))
	fmt.Println(err)
	// Output:
	// the dashboard sees 1 event
	// live: fixed: a missing import
	// sessionstore: store is read-only
}
