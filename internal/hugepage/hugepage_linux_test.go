package hugepage

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"unsafe"
)

// TestAdviseGivesHugePages advises fresh anonymous memory (mapped here,
// so never touched before), touches it and reads back from
// /proc/self/smaps how much of the advised mapping is in huge pages. Only
// a system with transparent huge pages off ("never") skips.
func TestAdviseGivesHugePages(t *testing.T) {
	mode, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil || strings.Contains(string(mode), "[never]") {
		t.Skipf("transparent huge pages are off here (%q, %v)", mode, err)
	}
	b, err := syscall.Mmap(-1, 0, 64<<20, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(b)
	Advise(unsafe.Pointer(&b[0]), len(b))
	fallbacks := vmstat("thp_fault_fallback")
	for i := 0; i < len(b); i += 4096 {
		b[i] = 1
	}
	// The advice splits the mapping at the first whole huge page.
	huge := anonHugeAround(t, (uintptr(unsafe.Pointer(&b[0]))+size-1)&^(size-1))
	if huge < 32<<20 && vmstat("thp_fault_fallback") > fallbacks {
		t.Skipf("the kernel tried huge pages but had none free (%d MiB in huge pages)", huge>>20)
	}
	if huge < 32<<20 {
		t.Errorf("%d MiB of the 64 MiB advised in huge pages (THP mode %q), want most of it", huge>>20, strings.TrimSpace(string(mode)))
	}
	Advise(unsafe.Pointer(&b[0]), MinBytes-1) // too small: nothing to do
}

// vmstat returns a counter of /proc/vmstat, or -1.
func vmstat(name string) int {
	b, err := os.ReadFile("/proc/vmstat")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			var n int
			fmt.Sscanf(v, "%d", &n)
			return n
		}
	}
	return -1
}

// anonHugeAround returns AnonHugePages of the mapping holding address a.
func anonHugeAround(t *testing.T, a uintptr) int {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Skipf("no /proc/self/smaps: %v", err)
	}
	defer f.Close()
	in := false
	s := bufio.NewScanner(f)
	for s.Scan() {
		line := s.Text()
		var lo, hi uintptr
		if n, _ := fmt.Sscanf(line, "%x-%x", &lo, &hi); n == 2 { // a mapping's first line
			in = lo <= a && a < hi
			continue
		}
		if kb, ok := strings.CutPrefix(line, "AnonHugePages:"); ok && in {
			var v int
			fmt.Sscanf(strings.TrimSpace(kb), "%d", &v)
			return v << 10
		}
	}
	return 0
}
