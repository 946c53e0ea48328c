package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/dubflow/dubflow/pkg/broker"
	"github.com/dubflow/dubflow/pkg/ops"
	"github.com/dubflow/dubflow/pkg/store"
	"github.com/dubflow/dubflow/pkg/wire"
	"github.com/dubflow/dubflow/pkg/worker"
	"github.com/rs/zerolog"
	"golang.org/x/sync/errgroup"
)

// service is the name in logs and broker connections.
const service = "dlq_recorder"

// handBackPause spaces the redeliveries of a message that could not be
// recorded (the database is down, say), so the recorder does not spin.
const handBackPause = time.Second

// run records task.dlq and task.tts_compensation until ctx is cancelled.
func run(ctx context.Context, environ map[string]string, logOut io.Writer) error {
	cfg, err := loadConfig(environ)
	if err != nil {
		return err
	}
	log := worker.NewLogger(service, cfg.Common, logOut)
	pool, err := worker.OpenDB(ctx, cfg.Common, log)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := store.Migrate(ctx, pool); err != nil {
		return err
	}
	reg := ops.NewRegistry()
	brokerMetrics, err := broker.NewMetrics(reg)
	if err != nil {
		return err
	}
	topo := broker.Topology{DeliveryLimit: cfg.DeliveryLimit}
	pubConn, err := broker.Dial(ctx, cfg.AMQPURL, service+"-publish", log,
		broker.WithTopology(topo), broker.WithMetrics(brokerMetrics))
	if err != nil {
		return err
	}
	defer pubConn.Close()
	pub := broker.NewPublisher(pubConn)
	defer pub.Close()
	consConn, err := broker.Dial(ctx, cfg.AMQPURL, service+"-consume", log, broker.WithTopology(topo))
	if err != nil {
		return err
	}
	defer consConn.Close()

	c := &consumers{rec: &recorder{pool: pool, pub: pub}, metrics: newMetrics(reg), log: log}
	checks := map[string]ops.Check{
		"postgres": func(ctx context.Context) error { return pool.Ping(ctx) },
		"consumer": func(context.Context) error {
			if !consConn.Consuming() {
				return errors.New("not consuming " + broker.DLQ + " and " + broker.Compensation)
			}
			return nil
		},
		"broker": func(context.Context) error {
			if !pubConn.Connected() {
				return errors.New("publishing connection down")
			}
			return nil
		},
	}
	log.Info().Int("concurrency", cfg.Concurrency).Msg("dlq_recorder starting")
	g, gctx := errgroup.WithContext(ctx)
	opsCtx, stopOps := context.WithCancel(context.WithoutCancel(ctx))
	g.Go(func() error {
		err := ops.Serve(opsCtx, cfg.OpsAddr, ops.Handler(reg, checks), log)
		if err != nil && opsCtx.Err() == nil {
			return err
		}
		return nil
	})
	var consumersDone errgroup.Group
	consumersDone.Go(func() error {
		return consConn.Consume(gctx, broker.ConsumeOptions{Queue: broker.DLQ, Concurrency: cfg.Concurrency,
			Tag: service + "-dlq"}, c.deadLetter)
	})
	consumersDone.Go(func() error {
		return consConn.Consume(gctx, broker.ConsumeOptions{Queue: broker.Compensation, Concurrency: cfg.Concurrency,
			Tag: service + "-compensation"}, c.compensation)
	})
	g.Go(func() error {
		defer stopOps()
		return consumersDone.Wait()
	})
	if err := g.Wait(); err != nil {
		return fmt.Errorf("%s: %w", service, err)
	}
	log.Info().Msg("dlq_recorder stopped")
	return nil
}

// consumers handle the deliveries of the two queues.
type consumers struct {
	rec     *recorder
	metrics *metrics
	log     zerolog.Logger
}

// deadLetter records one delivery of task.dlq, then acks it. A delivery
// that cannot be recorded is handed back, never acked.
func (c *consumers) deadLetter(ctx context.Context, d *broker.Delivery) {
	dl := parseDeadLetter(d.Delivery, time.Now())
	log := c.log.With().Str("message_id", dl.MessageID).Str("step", dl.Step).Int("attempt", dl.Attempt).
		Str("error_class", dl.ErrorClass).Str("source", dl.Source).Str("trace_id", dl.TraceID).Logger()
	if dl.TaskID != nil {
		log = log.With().Str("task_id", dl.TaskID.String()).Logger()
	}
	out, err := c.rec.deadLetter(ctx, dl)
	if err != nil && out.ID == 0 && !out.Failed {
		c.metrics.errors.WithLabelValues(broker.DLQ).Inc()
		log.Error().Err(err).Msg("dead letter not recorded; handed back")
		c.handBack(ctx, d, log)
		return
	}
	if err != nil {
		// Recorded; only the event's immediate publish failed.
		log.Warn().Err(err).Msg("event left in the outbox for the sweep")
	}
	if out.ID == 0 {
		c.metrics.duplicates.Inc()
		log.Info().Msg("dead letter recorded before; duplicate acked")
	} else {
		c.metrics.deadLetters.WithLabelValues(dl.Step, dl.ErrorClass, dl.Source).Inc()
		log.Error().Int64("dead_letter_id", out.ID).Bool("task_failed", out.Failed).
			Str("routing_key", dl.RoutingKey).Str("reason", dl.Reason).Msg("dead letter recorded")
	}
	if err := d.Ack(); err != nil {
		log.Warn().Err(err).Msg("ack failed; the redelivery will be recognised as a duplicate")
	}
}

// compensation records one delivery of task.tts_compensation against its
// segment, then acks it. An unreadable message is recorded as a dead letter.
func (c *consumers) compensation(ctx context.Context, d *broker.Delivery) {
	id := messageID(d.MessageId, d.Body)
	log := c.log.With().Str("message_id", id).Str("queue", broker.Compensation).Logger()
	msg, err := wire.DecodeCompensation(d.Body)
	if err != nil {
		dl := &deadLetter{MessageID: id, Raw: d.Body, RoutingKey: d.RoutingKey, Source: sourceUnknown,
			ErrorClass: wire.ClassInvalid, Step: wire.StepTTS, FailedAt: time.Now().UTC(),
			Reason: "invalid message in " + broker.Compensation + ": " + err.Error()}
		dl.describeOriginal(d.Body)
		if _, rerr := c.rec.deadLetter(ctx, dl); rerr != nil {
			c.metrics.errors.WithLabelValues(broker.Compensation).Inc()
			log.Error().Err(rerr).Msg("invalid compensation message not recorded; handed back")
			c.handBack(ctx, d, log)
			return
		}
		c.metrics.deadLetters.WithLabelValues(dl.Step, dl.ErrorClass, dl.Source).Inc()
		log.Error().Err(err).Msg("invalid compensation message recorded as a dead letter")
		_ = d.Ack()
		return
	}
	log = log.With().Str("task_id", msg.TaskID.String()).Int("segment_idx", msg.SegmentIdx).
		Str("trace_id", msg.TraceID).Logger()
	fresh, err := c.rec.compensation(ctx, id, msg)
	if err != nil {
		c.metrics.errors.WithLabelValues(broker.Compensation).Inc()
		log.Error().Err(err).Msg("compensation not recorded; handed back")
		c.handBack(ctx, d, log)
		return
	}
	if fresh {
		c.metrics.compensations.Inc()
		log.Warn().Str("error", msg.Error).Msg("tts compensation recorded; tts_requeue re-drives the task")
	} else {
		log.Info().Msg("compensation recorded before; duplicate acked")
	}
	if err := d.Ack(); err != nil {
		log.Warn().Err(err).Msg("ack failed; the redelivery will be recognised as a duplicate")
	}
}

func (c *consumers) handBack(ctx context.Context, d *broker.Delivery, log zerolog.Logger) {
	select {
	case <-time.After(handBackPause):
	case <-ctx.Done():
	}
	if err := d.Nack(true); err != nil {
		log.Warn().Err(err).Msg("nack failed; the broker redelivers")
	}
}
