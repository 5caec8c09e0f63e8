/* replay.h — `ddptop replay FILE [--speed X] [--headless [--json]]`: a
 * recording (record.h) played in the live job's screen. The recorded
 * frames go through codec_decode -> job_apply at their recorded arrival
 * times, and the start/exit records into job_rank_started/exited, so every
 * panel works as live. Keys pause, step, seek and change the speed; the
 * commands that need live workers (c, d, p) are disabled. Going back
 * rebuilds the model from the start (docs/RECORDING.md, "Replay").
 *
 * Owns: the recording loaded in memory, its own Job and view. Main thread.
 */
#ifndef DDPTOP_REPLAY_H
#define DDPTOP_REPLAY_H

/* argv holds what follows "replay". Returns 0 when the recording was played
 * (to its end or to its damage), 2 for bad input (one line on stderr), 1
 * for a failure on the way (no terminal, out of memory). */
int replay_main(int argc, char **argv);

#endif
