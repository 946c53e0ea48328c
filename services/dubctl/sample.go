package main

import (
	"fmt"
	"time"

	"github.com/dubflow/dubflow/pkg/media"
	"github.com/spf13/cobra"
)

// defaultSampleText is spoken in the sample video.
const defaultSampleText = "Hello and welcome. This short video was made to test the dubbing pipeline. " +
	"Every sentence you hear will be translated and spoken again in another language."

func init() {
	var out, text, voice string
	cmd := &cobra.Command{
		Use:   "sample --out FILE [--text TEXT]",
		Short: "Make a short MP4 with real speech (espeak-ng over a test picture)",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if text == "" {
				return usageError(fmt.Errorf("--text must not be empty"))
			}
			err := media.MakeSampleVideo(cmd.Context(), text, out, media.SampleOptions{
				Voice: voice, Lead: 700 * time.Millisecond})
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), out)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&out, "out", "", "MP4 file to write (required)")
	f.StringVar(&text, "text", defaultSampleText, "what the video says")
	f.StringVar(&voice, "voice", "en-us", "espeak-ng voice")
	_ = cmd.MarkFlagRequired("out")
	rootCmd.AddCommand(cmd)
}
