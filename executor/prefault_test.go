package executor

import "testing"

// TestPrefaultKeepsBytes: mapping a block's pages ahead leaves every byte
// as it was, for sizes and offsets that are not page or huge-page aligned
// (the advice must cover only whole pages inside the slice).
func TestPrefaultKeepsBytes(t *testing.T) {
	for _, n := range []int{0, 100, 64<<10 - 1, 64 << 10, 5<<20 + 123} {
		for _, off := range []int{0, 1, 4095} {
			buf := make([]byte, n+off+8192)
			for i := range buf {
				buf[i] = byte(i * 7)
			}
			prefault(buf[off : off+n])
			for i, x := range buf {
				if x != byte(i*7) {
					t.Fatalf("%d bytes at offset %d: byte %d changed to %#x", n, off, i, x)
				}
			}
		}
	}
}
