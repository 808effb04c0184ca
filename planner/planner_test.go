package planner

import (
	"github.com/fsdpc/fsdpc/internal/zootest"
	"os"
	"testing"

	"github.com/fsdpc/fsdpc/ir"
	"github.com/fsdpc/fsdpc/plans"
	"github.com/fsdpc/fsdpc/schedule"
)

func loadZoo(t testing.TB, name string) *ir.Model {
	t.Helper()
	return zootest.Model(t, name)
}

func TestPlanZoo(t *testing.T) {
	for _, name := range plans.Names() {
		t.Run(name, func(t *testing.T) {
			m := loadZoo(t, name)
			p, err := Plan(m, Options{CheckEveryPass: true})
			if err != nil {
				t.Fatal(err)
			}
			if os.Getenv("FSDPC_PRINT") == name {
				schedule.WriteText(os.Stdout, p)
			}
		})
	}
}
