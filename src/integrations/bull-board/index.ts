/**
 * `glidemq/bull-board`: the bull-board queue adapter for glidemq queues. Loaded only through this
 * subpath, so `@bull-board/api` (an optional peer dependency) is needed only by applications that
 * mount a board:
 *
 *   const serverAdapter = new ExpressAdapter().setBasePath('/admin/queues');
 *   createBullBoard({ queues: [new GlideMQAdapter(queue)], serverAdapter });
 *   app.use('/admin/queues', serverAdapter.getRouter());
 */
export { GlideMQAdapter, type GlideMQAdapterOptions } from './adapter.js';
