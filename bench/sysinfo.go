package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// machine describes where the figures were taken.
type machine struct {
	Cores  int
	CPU    string
	Memory string
	Kernel string
	FS     string // type, device, mount point and options of the scratch dir
	Go     string
}

func describeMachine(dir string) machine {
	m := machine{Cores: runtime.NumCPU(), Go: runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH}
	m.CPU = firstField("/proc/cpuinfo", "model name")
	if kb := firstField("/proc/meminfo", "MemTotal"); kb != "" {
		var n int64
		if _, err := fmt.Sscanf(kb, "%d kB", &n); err == nil {
			m.Memory = fmt.Sprintf("%.1f GiB", float64(n)/(1<<20))
		}
	}
	var u syscall.Utsname
	if syscall.Uname(&u) == nil {
		m.Kernel = utsString(u.Sysname[:]) + " " + utsString(u.Release[:])
	}
	m.FS = fileSystem(dir)
	return m
}

func utsString(b []int8) string {
	var s strings.Builder
	for _, c := range b {
		if c == 0 {
			break
		}
		s.WriteByte(byte(c))
	}
	return s.String()
}

// firstField returns the value of the first "key : value" line of a
// /proc file.
func firstField(path, key string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// fsMagic names the statfs(2) f_type values of common file systems.
var fsMagic = map[int64]string{
	0xEF53:     "ext2/3/4",
	0x58465342: "xfs",
	0x9123683E: "btrfs",
	0x01021994: "tmpfs",
	0x794C7630: "overlayfs",
	0x2FC12FC1: "zfs",
	0xF2F52010: "f2fs",
}

// mountOf returns dir made absolute and the fields of the /proc/mounts
// line with the longest mount point containing it (nil if none).
func mountOf(dir string) (string, []string) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		abs = dir
	}
	if r, err := filepath.EvalSymlinks(abs); err == nil {
		abs = r
	}
	var best []string
	if f, err := os.Open("/proc/mounts"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) < 4 {
				continue
			}
			mp := fields[1]
			if abs == mp || strings.HasPrefix(abs, strings.TrimSuffix(mp, "/")+"/") {
				if best == nil || len(mp) >= len(best[1]) {
					best = fields
				}
			}
		}
		f.Close()
	}
	return abs, best
}

// fileSystem describes the file system holding dir: the longest mount
// point of /proc/mounts that contains it, confirmed by statfs(2).
func fileSystem(dir string) string {
	abs, best := mountOf(dir)
	var st syscall.Statfs_t
	magic := "unknown"
	if syscall.Statfs(abs, &st) == nil {
		magic = fmt.Sprintf("0x%X", st.Type)
		if name, ok := fsMagic[int64(st.Type)]; ok {
			magic = name
		}
	}
	if best == nil {
		return "statfs type " + magic
	}
	return fmt.Sprintf("%s on %s mounted at %s (%s; statfs: %s)", best[2], best[0], best[1], best[3], magic)
}

// peakRSS is the process's peak resident set (VmHWM), in bytes.
func peakRSS() int64 {
	v := firstField("/proc/self/status", "VmHWM")
	var kb int64
	if _, err := fmt.Sscanf(v, "%d kB", &kb); err != nil {
		return 0
	}
	return kb << 10
}

// blocks is the space allocated to a file (st_blocks), in bytes.
func blocks(info os.FileInfo) int64 {
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return st.Blocks * 512
	}
	return info.Size()
}

// loadSample is what the machine had done by a moment, to tell how busy
// the rest of it was during a workload.
type loadSample struct {
	at                 time.Time
	busy, steal, total uint64        // jiffies (USER_HZ) of all CPUs: busy excludes idle, iowait and steal
	own                time.Duration // CPU of this process and of its children waited for
	ok                 bool
}

// sampleLoad reads the counters.
func sampleLoad() loadSample {
	ls := loadSample{at: time.Now()}
	if b, err := os.ReadFile("/proc/stat"); err == nil {
		line, _, _ := strings.Cut(string(b), "\n")
		f := strings.Fields(line)
		if len(f) >= 9 && f[0] == "cpu" {
			var v [8]uint64
			for i := range v {
				v[i], _ = strconv.ParseUint(f[i+1], 10, 64)
			}
			// user nice system idle iowait irq softirq steal
			ls.busy = v[0] + v[1] + v[2] + v[5] + v[6]
			ls.steal = v[7]
			ls.total = v[0] + v[1] + v[2] + v[3] + v[4] + v[5] + v[6] + v[7]
			ls.ok = true
		}
	}
	for _, who := range []int{syscall.RUSAGE_SELF, syscall.RUSAGE_CHILDREN} {
		var ru syscall.Rusage
		if syscall.Getrusage(who, &ru) == nil {
			ls.own += time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		}
	}
	return ls
}

// loadRow is how busy the rest of the machine was during one workload.
type loadRow struct {
	name      string
	wall      time.Duration
	othersCPU float64 // share of all cores busy with other processes' work (and the kernel's)
	steal     float64 // share of all cores' time stolen by the hypervisor
	loadavg   string  // /proc/loadavg's 1-minute figure at the end (counts this run's blocked threads too)
}

func loadBetween(name string, a, b loadSample, cores int) loadRow {
	r := loadRow{name: name, wall: b.at.Sub(a.at), othersCPU: -1, steal: -1}
	if a.ok && b.ok && b.total > a.total {
		const hz = 100 // USER_HZ
		busy := float64(b.busy-a.busy)/hz - (b.own - a.own).Seconds()
		r.othersCPU = max(0, busy/(r.wall.Seconds()*float64(cores)))
		r.steal = float64(b.steal-a.steal) / float64(b.total-a.total)
	}
	if la, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(la)); len(f) > 0 {
			r.loadavg = f[0]
		}
	}
	return r
}
