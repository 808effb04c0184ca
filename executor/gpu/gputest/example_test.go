package gputest

import (
	"fmt"

	"github.com/fsdpc/fsdpc/ir"
)

func ExampleDevice() {
	d := New(WithCapacity(1<<20), WithRaceDetection())
	defer d.Close()
	s0, _ := d.NewStream(0)
	s1, _ := d.NewStream(-1)
	e, _ := d.NewEvent()
	p, _ := d.Alloc(64)
	q, _ := d.Alloc(64)
	d.Fill(p, ir.FP32, 16, 1, s0)
	d.Copy(q, p, 64, s1) // no Wait: a hazard
	d.Record(e, s1)
	fmt.Println(d.SyncEvent(e))
	// Output:
	// gputest: SyncEvent(event 1): earlier asynchronous error: gputest: Copy on stream 2: hazard: stream 2 reads bytes [0x1000000000, 0x1000000040) of device allocation 0x1000000000 (64 bytes), which stream 1 wrote, and no Record on stream 1 and Wait on stream 2 orders them
}
