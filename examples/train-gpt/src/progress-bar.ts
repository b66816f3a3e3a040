/** Formats seconds as m:ss. */
export function formatDuration(seconds: number): string {
  if (!Number.isFinite(seconds) || seconds < 0) return '--:--';
  const whole = Math.round(seconds);
  return `${Math.floor(whole / 60)}:${String(whole % 60).padStart(2, '0')}`;
}

export interface ProgressState {
  step: number;
  totalSteps: number;
  loss: number;
  tokensPerSecond: number;
  elapsedSeconds: number;
  metric: string;
}

/**
 * A one-line progress bar: redrawn in place on a terminal (`\r` and clear-line), otherwise printed
 * as a plain line about every tenth of the run so logs stay short.
 */
export class ProgressBar {
  private lastPrintedTenth = -1;
  private drawn = false;

  constructor(
    private readonly stream: NodeJS.WriteStream,
    private readonly style: 'bar' | 'lines' | 'none',
  ) {}

  private get live(): boolean {
    return this.style === 'bar' && this.stream.isTTY === true;
  }

  render(state: ProgressState): string {
    const fraction = state.totalSteps === 0 ? 1 : state.step / state.totalSteps;
    const width = 24;
    const filled = Math.round(fraction * width);
    const eta =
      state.step === 0 ? Number.NaN : (state.elapsedSeconds / state.step) * (state.totalSteps - state.step);
    return (
      `[${'█'.repeat(filled)}${'░'.repeat(width - filled)}] ${String(state.step).padStart(String(state.totalSteps).length)}/${state.totalSteps}` +
      ` loss ${state.loss.toFixed(3)} · ${state.tokensPerSecond.toFixed(0)} tok/s · ${state.metric} · ETA ${formatDuration(eta)}`
    );
  }

  update(state: ProgressState): void {
    if (this.style === 'none') return;
    const line = this.render(state);
    if (this.live) {
      this.stream.write(`\r\x1b[K${line}`);
      this.drawn = true;
      return;
    }
    const tenth = Math.floor((10 * state.step) / Math.max(1, state.totalSteps));
    if (tenth !== this.lastPrintedTenth) {
      this.lastPrintedTenth = tenth;
      this.stream.write(`${line}\n`);
    }
  }

  /** Prints a line above the bar (the bar is redrawn by the next update). */
  log(text: string): void {
    if (this.live && this.drawn) this.stream.write('\r\x1b[K');
    this.stream.write(`${text}\n`);
  }

  finish(): void {
    if (this.live && this.drawn) this.stream.write('\n');
    this.drawn = false;
  }
}
