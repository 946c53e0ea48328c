package task_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/dubflow/dubflow/pkg/outbox"
	"github.com/dubflow/dubflow/pkg/task"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// An operator's tool cancels a task: the transition and its event commit
// together, the event is published right after the commit (or, should the
// process die first, by a sweep), and a task that ended already is refused.
func ExampleApply() {
	ctx := context.Background()
	var pool *pgxpool.Pool   // the database
	var pub outbox.Publisher // the broker
	id := uuid.MustParse("0b4d7c1e-3c1a-4f5e-9a51-2f0f6f3d1a10")

	err := outbox.Commit(ctx, pool, pub, func(tx pgx.Tx) ([]int64, error) {
		res, err := task.Apply(ctx, tx, task.Cancel(task.Ref{ID: id}, "asked by the customer"))
		return []int64{res.EventID}, err
	})
	switch {
	case errors.Is(err, task.ErrRefused):
		fmt.Println("the task ended already:", err)
	case errors.Is(err, outbox.ErrUnpublished):
		fmt.Println("cancelled; the event waits for the outbox sweep:", err)
	case err != nil:
		fmt.Println("cancel:", err)
	}
}
