package calibrate

import (
	"fmt"
	"strings"
	"sync"

	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/planner"
	"github.com/fsdpc/fsdpc/schedule"
)

// planRow plans one row's model file; nil when the run does not fit.
func planRow(id, src string) (*schedule.Plan, error) {
	m, err := ir.Load(id+".toml", []byte(src))
	if err != nil {
		return nil, fmt.Errorf("row %s: %w", id, err)
	}
	p, err := planner.Plan(m, planner.Options{})
	if err != nil && !strings.Contains(err.Error(), "does not fit") {
		return nil, fmt.Errorf("row %s: %w", id, err)
	}
	return p, nil
}

// planCacheBudget bounds the bytes of the plans held for predictions: a
// fit simulates every row at each evaluation, so rows whose plans fit in
// it are planned once, and a larger CSV costs planning time, not memory
// (Go's collector lets the heap grow to about twice what is live). The
// calibration set's 35 rows take about 35 MB.
const planCacheBudget = 256 << 20

// opBytes is a planned op's share of its plan's heap: measured over the
// calibration set's rows (TestPlanBytesEstimate), 330-350 bytes an op.
const opBytes = 350

// planCache holds plans by model file (identical rows share one) within a
// budget of estimated bytes. It keeps the first plans that fit and admits
// no more: a fit visits the rows in the same order at every evaluation, a
// pattern in which evicting the least recently used would evict every
// plan just before its use.
type planCache struct {
	mu     sync.Mutex
	budget int64
	used   int64
	byKey  map[string]*schedule.Plan
}

var plans = newPlanCache(planCacheBudget)

func newPlanCache(budget int64) *planCache {
	return &planCache{budget: budget, byKey: map[string]*schedule.Plan{}}
}

// planBytes estimates a plan's memory from its ops, which dominate it.
func planBytes(p *schedule.Plan) int64 { return int64(len(p.Ops))*opBytes + 4096 }

// get returns the plan of src, planning it again if it was not held.
func (c *planCache) get(id, src string) (*schedule.Plan, error) {
	c.mu.Lock()
	p, ok := c.byKey[src]
	c.mu.Unlock()
	if ok {
		return p, nil
	}
	p, err := planRow(id, src)
	if err != nil {
		return nil, err
	}
	if p == nil {
		return nil, fmt.Errorf("row %s: planned before, no longer fits", id)
	}
	c.put(src, p)
	return p, nil
}

// put holds p as src's plan if it fits in what is left of the budget.
func (c *planCache) put(src string, p *schedule.Plan) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.byKey[src]; ok {
		return
	}
	if b := planBytes(p); c.used+b <= c.budget {
		c.byKey[src] = p
		c.used += b
	}
}
