//go:build unix

package datasets

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Special files with an image's name are errors naming the file, found
// at once: opening a named pipe used to block a worker for ever.
func TestImageFolderSpecialFiles(t *testing.T) {
	tests := []struct {
		name    string
		make    func(t *testing.T, path string)
		regular bool // the file loads
	}{
		{"named pipe", func(t *testing.T, path string) {
			if err := syscall.Mkfifo(path, 0o644); err != nil {
				t.Skip("no named pipes here:", err)
			}
		}, false},
		{"link to a named pipe", func(t *testing.T, path string) {
			fifo := filepath.Join(t.TempDir(), "fifo")
			if err := syscall.Mkfifo(fifo, 0o644); err != nil {
				t.Skip("no named pipes here:", err)
			}
			mustSymlink(t, fifo, path)
		}, false},
		{"link to a device", func(t *testing.T, path string) { mustSymlink(t, os.DevNull, path) }, false},
		{"socket", func(t *testing.T, path string) {
			l, err := net.Listen("unix", path)
			if err != nil {
				t.Skip("no unix sockets here:", err)
			}
			t.Cleanup(func() { l.Close() })
		}, false},
		{"link to a regular file", func(t *testing.T, path string) {
			mustSymlink(t, putFile(t, t.TempDir(), "real.png", pngBytes(t, colourful(3, 2, 9))), path)
		}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			putFile(t, root, "a/good.png", pngBytes(t, colourful(4, 4, 1)))
			path := filepath.Join(root, "a", "x.png")
			tc.make(t, path)

			for _, opt := range []ImageFolderOptions{{}, {Verify: true}, {OnCorrupt: CorruptSkip}, {OnCorrupt: CorruptSkip, Verify: true}} {
				var s *ImageFolderSet
				var err error
				within(t, 10*time.Second, func() {
					if s, err = ImageFolder(root, opt); err == nil {
						_, err = s.Get(s.Len() - 1) // the special file, unless Verify dropped it
					}
				})
				switch {
				case tc.regular || opt.OnCorrupt == CorruptSkip:
					if err != nil {
						t.Fatalf("%+v: %v", opt, err)
					}
				case err == nil || !strings.Contains(err.Error(), path):
					t.Fatalf("%+v: error %v, want one naming %s", opt, err, path)
				case tc.name != "socket" && !errors.Is(err, ErrNotRegular):
					t.Fatalf("%+v: error %v, want ErrNotRegular", opt, err)
				}
				if opt.OnCorrupt == CorruptSkip && !tc.regular {
					if skipped := s.Skipped(); len(skipped) != 1 || skipped[0].Path != path {
						t.Errorf("%+v: skipped %v, want %s", opt, skipped, path)
					}
				}
			}
		})
	}
}

func mustSymlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// within runs f and fails the test if it has not returned after d, so a
// regression that blocks fails instead of hanging the run.
func within(t *testing.T, d time.Duration, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("still blocked after %v", d)
	}
}
