package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
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

// fileSystem describes the file system holding dir: the longest mount
// point of /proc/mounts that contains it, confirmed by statfs(2).
func fileSystem(dir string) string {
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
