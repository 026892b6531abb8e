package diskspace

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// fakeFS is a file system whose available space the test sets; the
// ballast file's blocks count against it, as on a real one.
type fakeFS struct {
	free uint64 // available space besides the ballast
	dir  string
}

func (f *fakeFS) stat(string) (uint64, uint64, error) {
	used := uint64(0)
	if fi, err := os.Stat(filepath.Join(f.dir, ReserveFileName)); err == nil {
		used = uint64(fi.Sys().(*syscall.Stat_t).Blocks) * 512
	}
	if used > f.free {
		return 0, 1 << 30, nil
	}
	return f.free - used, 1 << 30, nil
}

func TestMonitorThresholdBallastAndRecovery(t *testing.T) {
	dir := t.TempDir()
	const reserve = 1 << 20
	fs := &fakeFS{free: 100 << 20, dir: dir}
	m := newMonitor(Config{Dir: dir, ReserveBytes: reserve, NodeID: 7}, fs.stat)
	if err := m.Check(); err != nil {
		t.Fatal(err)
	}
	if st := m.Status(); st.Full || st.BallastBytes != reserve {
		t.Fatalf("plenty of space: %+v, want not full with a %d-byte ballast", st, reserve)
	}

	// Below the threshold: full, with an error naming node and directory.
	fs.free = reserve + reserve/2 // the ballast takes reserve of it
	if err := m.Check(); err != nil {
		t.Fatal(err)
	}
	err := m.Err()
	if !errors.Is(err, ErrFull) || !strings.Contains(err.Error(), "node 7") || !strings.Contains(err.Error(), dir) {
		t.Fatalf("below the reserve: Err() = %v, want ErrFull naming node 7 and %s", err, dir)
	}

	// A write found no space: the ballast goes, once.
	if !m.NoteNoSpace(errors.New("ENOSPC")) {
		t.Fatal("NoteNoSpace did not release the ballast")
	}
	if _, err := os.Stat(m.ballast); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("ballast still there: %v", err)
	}
	if m.NoteNoSpace(errors.New("ENOSPC")) {
		t.Fatal("NoteNoSpace released a ballast twice")
	}

	// Space above the threshold but not room for the ballast too: still
	// full, so the node never runs without its reserve.
	fs.free = reserve + reserve/2
	if err := m.Check(); err != nil {
		t.Fatal(err)
	}
	if !m.Full() {
		t.Fatalf("no ballast yet, but not full: %+v", m.Status())
	}

	// Space is back: the ballast returns and writes are allowed again.
	fs.free = 10 * reserve
	if err := m.Check(); err != nil {
		t.Fatal(err)
	}
	if st := m.Status(); st.Full || st.BallastBytes != reserve || st.AvailableBytes != 9*reserve {
		t.Fatalf("space back: %+v, want not full, ballast re-created", st)
	}
}

func TestMonitorOffAndNil(t *testing.T) {
	var nilM *Monitor
	if nilM.Err() != nil || nilM.Full() || nilM.NoteNoSpace(errors.New("x")) || nilM.Enabled() {
		t.Fatal("a nil monitor must be off")
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, ReserveFileName), make([]byte, 4096), 0o600); err != nil {
		t.Fatal(err)
	}
	m, err := Open(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if m.Enabled() || m.Full() {
		t.Fatal("a monitor with no reserve must be off")
	}
	if _, err := os.Stat(filepath.Join(dir, ReserveFileName)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("an old reserve file was not given back: %v", err)
	}
}

// A file system with room above the reserve but not for the ballast too
// does not make the node full: only a released ballast does.
func TestMonitorNoRoomForBallastIsNotFull(t *testing.T) {
	dir := t.TempDir()
	const reserve = 1 << 20
	fs := &fakeFS{free: reserve + reserve/2, dir: dir}
	m := newMonitor(Config{Dir: dir, ReserveBytes: reserve}, fs.stat)
	if err := m.Check(); err != nil {
		t.Fatal(err)
	}
	if st := m.Status(); st.Full || st.BallastBytes != 0 {
		t.Fatalf("%+v: want not full, no ballast", st)
	}
	fs.free = 4 * reserve
	if err := m.Check(); err != nil {
		t.Fatal(err)
	}
	if st := m.Status(); st.Full || st.BallastBytes != reserve {
		t.Fatalf("%+v: want the ballast created once there is room", st)
	}
}
