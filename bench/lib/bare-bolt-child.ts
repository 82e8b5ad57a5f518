import { type BareBolt, type BareModal, startBareBolt } from './bare-bolt.ts';
import { serveProc } from './proc.ts';

/** The bare Bolt baseline in a process of its own (forked by bare-bolt.ts), so its CPU time is counted alone. */
let bolt: BareBolt | undefined;

serveProc(
  {
    async start(op) {
      bolt = await startBareBolt(
        String(op.signingSecret),
        String(op.actionId),
        op.modal as BareModal | undefined,
      );
      return bolt.url;
    },
  },
  async () => {
    await bolt?.close();
  },
);
