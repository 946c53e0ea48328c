package main

import "github.com/dubflow/dubflow/pkg/view"

// This file is the console's side of a task that dubs into several
// languages at once: a parent task names its
// targetLanguages; where its asr completes, one child task per language is
// spawned (id wire.ChildTaskID(parent, language)), each muxing the video it
// reads from videos/{child}/source.mp4.

// languagesView is the "languages" object of GET /api/tasks/{id}.
type languagesView = view.Languages
