// Runs dynalite (a DynamoDB-compatible server) for ubik's tests.
//
// Why not dynalite's own cli.js: dynalite 4.0.0 throws from a request's
// 'error' handler, so a client that aborts a request mid-body (a timeout,
// a cancelled context) kills the whole server and every test that uses it.
// Here an aborted request costs only that request.
'use strict'
// --name value pairs, as dynalite's cli.js takes them (numbers as numbers).
const argv = {}
const args = process.argv.slice(2)
for (let i = 0; i < args.length; i += 2) {
  const name = args[i].replace(/^--/, '')
  const v = args[i + 1]
  argv[name] = v !== undefined && /^[0-9]+$/.test(v) ? Number(v) : v
}

process.on('uncaughtException', function (err) {
  if (err && (err.code === 'ECONNRESET' || err.message === 'aborted')) {
    console.error('dynalite: a client aborted a request (%s); going on', err.message)
    return
  }
  console.error('dynalite: fatal:', err)
  process.exit(1)
})
process.on('SIGTERM', function () { process.exit(0) })

const server = require('dynalite')(argv)
server.listen(argv.port || 8000, argv.host || '127.0.0.1', function () {
  const a = server.address()
  console.log('Dynalite listening at: http://%s:%s', a.address, a.port)
})
