package sessionstore

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"

	"github.com/google/uuid"
)

// The lane-loop child of TestSIGKILLDuringLaneMoves (lanes_kill_test.go),
// run by apiHelper (lock_test.go) on every platform that builds the tests.

// laneKillNames are the lane names the lane-loop child uses.
var laneKillNames = []string{DefaultLane, "l1", "l2", "l3"}

// laneLoop runs in a child process (apiHelper's "lane-loop" mode): it
// opens the store at dir and, forever, creates, moves, deletes and
// switches lanes of the session and appends to it, at random. Before each
// call it prints its intent ("I A", "I C <name> <at>", "I M <name> <to>",
// "I D <name>", "I S <name>"); after the call returns nil it prints the
// acknowledgement ("A <id> <parent>" for an append, "OK" for a lane
// call). Any error ends it with "E <error>".
func laneLoop(dir string, id uuid.UUID, seed string) string {
	ctx := context.Background()
	n, err := strconv.ParseUint(seed, 10, 64)
	if err != nil {
		return "E bad seed: " + err.Error() + "\n"
	}
	rng := rand.New(rand.NewPCG(n, 0x1a9e5))
	s, err := Open(dir, nil)
	if err != nil {
		return "E open: " + err.Error() + "\n"
	}
	defer s.Close()
	w := bufio.NewWriter(os.Stdout)
	say := func(format string, args ...any) {
		fmt.Fprintf(w, format+"\n", args...)
		w.Flush()
	}
	ls, err := s.Lanes(ctx, id)
	if err != nil {
		return "E lanes: " + err.Error() + "\n"
	}
	var known []uuid.UUID
	lanes := map[string]bool{}
	active := ""
	for _, l := range ls {
		known = append(known, l.Tip)
		lanes[l.Name] = true
		if l.Active {
			active = l.Name
		}
	}
	for {
		name := laneKillNames[rng.IntN(len(laneKillNames))]
		at := known[rng.IntN(len(known))]
		switch op := rng.IntN(8); {
		case op < 3:
			say("I A")
			e, err := s.Append(ctx, id, UserText("lane loop"))
			if err != nil {
				return "E append: " + err.Error() + "\n"
			}
			known = append(known, e.ID)
			say("A %s %s", e.ID, e.ParentID)
			continue
		case op == 3 && !lanes[name]:
			say("I C %s %s", name, at)
			err = s.CreateLane(ctx, id, name, at)
			lanes[name] = true
		case op == 4 && lanes[name]:
			say("I M %s %s", name, at)
			err = s.MoveLane(ctx, id, name, at)
		case op == 5 && lanes[name] && name != active:
			say("I D %s", name)
			err = s.DeleteLane(ctx, id, name)
			delete(lanes, name)
		case op >= 6 && lanes[name]:
			say("I S %s", name)
			err = s.SwitchLane(ctx, id, name)
			active = name
		default:
			continue
		}
		if err != nil {
			return "E lane call: " + err.Error() + "\n"
		}
		say("OK")
	}
}
