package vfs

import (
	"errors"
	"io/fs"
	"os"
	"syscall"
)

// datasync flushes the file's data and the metadata needed to read it back
// (its size), but not its timestamps: fdatasync(2).
func datasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			return &fs.PathError{Op: "fdatasync", Path: f.Name(), Err: err}
		}
		return nil
	}
}

// readFileOS reads the regular file name whole into buf (from its start),
// growing buf only if the file does not fit, with no system call but
// open(2), read(2) and close(2) when buf has room: read(2) of a regular
// file returns fewer bytes than asked only at the end of the file, so a
// short read ends it without a read that returns 0, and a buffer a caller
// reuses needs no fstat(2) to size it (with none, the file's size from
// fstat sizes it). The *os.File that OpenFile returns would add an fcntl
// (os.NewFile), an fstat and a final read: six calls where three do, which
// in a virtual machine dominates reading a small file such as session.json.
func readFileOS(name string, buf []byte) ([]byte, error) {
	const maxRead = 1 << 30
	fd, err := openFD(name, syscall.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer syscall.Close(fd)
	if cap(buf) == 0 {
		var st syscall.Stat_t
		if err := syscall.Fstat(fd, &st); err != nil {
			return nil, &fs.PathError{Op: "fstat", Path: name, Err: err}
		}
		buf = make([]byte, 0, min(st.Size, 1<<40)+1) // +1: the read that ends it is short
	}
	buf = buf[:0]
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		// One read returns at most about 2 GiB however much is asked, so
		// ask for less at a time and a short read still means the end.
		want := min(cap(buf)-len(buf), maxRead)
		n, err := syscall.Read(fd, buf[len(buf):len(buf)+want])
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "read", Path: name, Err: err}
		}
		buf = buf[:len(buf)+n]
		if n < want {
			return buf, nil
		}
	}
}
