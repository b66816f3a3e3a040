/** Sums of per-batch values weighted by batch size; the epoch's logs are their means (model.fit's BaseLogger). */
export class WeightedMeans {
  private readonly totals = new Map<string, number>();
  private seen = 0;

  add(names: readonly string[], values: readonly number[], count: number): void {
    names.forEach((name, index) => {
      this.totals.set(name, (this.totals.get(name) ?? 0) + values[index]! * count);
    });
    this.seen += count;
  }

  means(prefix = ''): Record<string, number> {
    const logs: Record<string, number> = {};
    for (const [name, total] of this.totals) logs[`${prefix}${name}`] = total / this.seen;
    return logs;
  }
}
