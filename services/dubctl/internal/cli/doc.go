// Package cli is what every command of dubctl shares and none owns: the
// exit codes and the errors that carry them, the arguments' checks, the
// output (indented JSON, aligned tables, text from people and engines with
// its control characters escaped), the flags of --wait, and how a command
// opens the mode it runs in (Open) and shows what it read (Show,
// ShowCmd). It depends on no dubflow package.
package cli
