package stack

import (
	"context"
	"fmt"
	"sort"
	"sync"

	"github.com/dubflow/dubflow/pkg/localstack"
	"github.com/jackc/pgx/v5"
)

// haNodes are the sizes of the -ha stack: RabbitMQ nodes, PostgreSQL
// servers (a primary and a standby), MinIO processes (one erasure set).
const (
	HARabbitNodes = 3
	HAPGNodes     = 2
	HAMinioNodes  = 4
)

// HAStack is the -ha form of the private stack: a RabbitMQ cluster whose
// nodes live in network namespaces of their own, a PostgreSQL cluster that
// Patroni fails over, a distributed MinIO.
type HAStack struct {
	Net   *localstack.NetCluster
	Pg    *localstack.PGCluster
	Minio *localstack.MinioSet

	mu sync.Mutex
	// minioKilled are the MinIO processes killed (and started again) during
	// the run, which the heal check reads from.
	minioKilled map[int]bool
}

// CreateHADatabase creates the dubflow database on the cluster's primary.
func CreateHADatabase(ctx context.Context, pg *localstack.PGCluster) error {
	conn, err := pgx.Connect(ctx, pg.URL("postgres"))
	if err != nil {
		return fmt.Errorf("connect to the private postgres cluster: %w", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE dubflow"); err != nil {
		return fmt.Errorf("create database dubflow: %w", err)
	}
	return nil
}

func ReplicationMode(async bool) string {
	if async {
		return "asynchronous standby"
	}
	return "synchronous standby"
}

func LogErr(logf func(string, ...any), what string, err error) {
	if err != nil {
		logf("%s: %v", what, err)
	}
}

// MinioLost records that MinIO process i was killed (and started again).
func (h *HAStack) MinioLost(i int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.minioKilled[i] = true
}

// MinioLostNodes are the MinIO processes killed during the run, in order.
func (h *HAStack) MinioLostNodes() []int {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []int
	for i := range h.minioKilled {
		out = append(out, i)
	}
	sort.Ints(out)
	return out
}

// NewHAStack returns an -ha stack with nothing started yet.
func NewHAStack() *HAStack { return &HAStack{minioKilled: map[int]bool{}} }
