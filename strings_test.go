package sessionstore

import (
	"context"
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/blob"
	"github.com/sessionstore/sessionstore/internal/vfs"
)

// realScreenshot returns the smallest base64 PNG of at least min bytes
// in the shared Claude Code transcripts, and where it came from; without
// the shared data, a stand-in of 200,000 bytes of base64 (random bytes,
// which compress as a PNG's do).
func realScreenshot(t *testing.T, min int) (img, from string) {
	t.Helper()
	dir := sharedDataDir()
	if dir == "" {
		rng := rand.New(rand.NewPCG(1, 3))
		raw := make([]byte, 150_000)
		for i := range raw {
			raw[i] = byte(rng.Uint32())
		}
		return base64.StdEncoding.EncodeToString(raw), "a stand-in (no shared data)"
	}
	re := regexp.MustCompile(`"data":"(iVBORw0KGgo[A-Za-z0-9+/=]+)"`)
	claudeCodeLines(t, dir, func(path string, line []byte) {
		for _, m := range re.FindAllSubmatch(line, -1) {
			if s := string(m[1]); len(s) >= min && (img == "" || len(s) < len(img)) {
				img, from = s, filepath.Base(path)
			}
		}
	})
	require.NotEmpty(t, img, "the shared transcripts hold a PNG of at least %d bytes of base64", min)
	return img, from
}

// sessionBytes sums the sizes of the files of session id's directory.
func sessionBytes(t *testing.T, m vfs.FS, id uuid.UUID) (total, blobs int64) {
	t.Helper()
	var walk func(dir string)
	walk = func(dir string) {
		names, err := m.ReadDir(dir)
		require.NoError(t, err)
		for _, name := range names {
			p := filepath.Join(dir, name)
			info, err := m.Stat(p)
			require.NoError(t, err)
			if info.IsDir() {
				walk(p)
				continue
			}
			total += info.Size()
			if strings.Contains(p, "/"+blobsDir+"/") {
				blobs += info.Size()
			}
		}
	}
	walk(sessionPath(id))
	return total, blobs
}

// screenshotTurn is a harness's request record that sends the
// screenshot again, as Anthropic's Messages API takes it.
func screenshotTurn(i int, img string) Event {
	return NewEvent(KindCustom, RoleUser, map[string]any{
		"type": "request",
		"content": []any{
			map[string]any{"type": "text", "text": fmt.Sprintf("Turn %d: does the page still look like this?", i)},
			map[string]any{"type": "image", "source": map[string]any{"type": "base64", "media_type": "image/png", "data": img}},
		},
	})
}

// TestSplitScreenshotTwentyTimes shows string blobs on real data: a
// screenshot from the shared transcripts (the smallest over the default
// StringThreshold) sent again in 20 events costs about one screenshot
// (under 1.2 times its blob), where storing each record whole costs 20;
// Load returns every record byte for byte, Verify finds the session
// clean, and GC removes nothing it needs.
func TestSplitScreenshotTwentyTimes(t *testing.T) {
	ctx := context.Background()
	img, from := realScreenshot(t, DefaultStringThreshold)
	one := int64(len(blob.Encode([]byte(img), nil)))
	var evs []Event
	for i := range 20 {
		evs = append(evs, screenshotTurn(i, img))
	}
	cost := map[string]int64{}
	for _, mode := range []struct {
		name string
		o    Options
	}{{"split", Options{}}, {"whole", Options{StringThreshold: -1}}} {
		m, s, id := memSession(t, mode.o)
		for _, ev := range evs {
			_, err := s.Append(ctx, id, ev)
			require.NoError(t, err)
		}
		got, err := s.Load(ctx, id)
		require.NoError(t, err)
		require.Len(t, got, len(evs))
		for i := range got {
			got[i], err = s.Resolve(ctx, id, got[i])
			require.NoError(t, err)
			assert.Equal(t, string(evs[i].Record), string(got[i].Record), "%s: record %d byte for byte", mode.name, i)
		}
		r, err := s.Verify(ctx, id)
		require.NoError(t, err)
		assert.True(t, r.OK(), "%v", r.Problems)
		gc, err := s.GC(ctx, id)
		require.NoError(t, err)
		assert.Zero(t, gc.Removed, "%s: GC keeps every blob", mode.name)
		require.NoError(t, s.Close())
		total, blobs := sessionBytes(t, m, id)
		cost[mode.name] = total
		t.Logf("%s: 20 events with the same %d-byte screenshot (%s): %d bytes in the session, %d in blobs; one screenshot's blob is %d bytes (%.2fx)",
			mode.name, len(img), from, total, blobs, one, float64(total)/float64(one))
	}
	assert.Less(t, float64(cost["split"]), 1.2*float64(one), "split: about one screenshot")
	assert.Greater(t, float64(cost["whole"]), 15*float64(one), "whole: each record holds its copy")
}
