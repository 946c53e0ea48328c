// Command psmeasure compares the CPU-seconds and peak memory of decoding
// the same chunks with pocketsphinx_continuous per chunk (the old path)
// and with one decoder kept loaded (the new path), in one invocation:
//
//	go run -tags pocketsphinx_lib ./pkg/speech/internal/psmeasure two_cities.wav
package main

import (
	"context"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/dubflow/dubflow/pkg/speech"
)

func cpu(who int) time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(who, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func main() {
	ctx := context.Background()
	var chunks []string
	ch := &speech.Chunker{ChunkSeconds: 10, TempDir: os.TempDir()}
	if err := ch.Split(ctx, os.Args[1], func(c speech.Chunk) error { chunks = append(chunks, c.Path); return nil }); err != nil {
		panic(err)
	}
	defer func() {
		for _, c := range chunks {
			os.Remove(c)
		}
	}()
	cli := &speech.Pocketsphinx{Command: "pocketsphinx_continuous"}
	res := &speech.Pocketsphinx{Decoders: 1}
	c0 := cpu(syscall.RUSAGE_CHILDREN)
	for _, c := range chunks {
		if _, err := cli.Transcribe(ctx, c, "en"); err != nil {
			panic(err)
		}
	}
	cliCPU := cpu(syscall.RUSAGE_CHILDREN) - c0
	s0 := cpu(syscall.RUSAGE_SELF)
	for _, c := range chunks {
		if _, err := res.Transcribe(ctx, c, "en"); err != nil {
			panic(err)
		}
	}
	resCPU := cpu(syscall.RUSAGE_SELF) - s0
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	var rc syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &rc)
	fmt.Printf("chunks %d: command %.2f CPU-s (peak child %d MB), loaded %.2f CPU-s (peak self %d MB), ratio %.2f\n",
		len(chunks), cliCPU.Seconds(), rc.Maxrss/1024, resCPU.Seconds(), ru.Maxrss/1024, resCPU.Seconds()/cliCPU.Seconds())
}
