// Package inject is deterministic event injection for softnic's switches,
// after Lumina (Yu et al., SIGCOMM 2023): a rule names one packet of one
// flow and what to do to it, and every application is logged with its
// time. Its two users are the embedded fabric's switch (package fabric)
// and the real-wire switch (softnic switch), with the same meaning.
package inject
