// Replaces the StreamPollFeeder that trixie's maven-surefire-common 2.22.3 shades from maven-shared-utils 3.4.2:
// that one forwards bytes only while InputStream.available() > 0, which surefire's command streams never report
// (they do not override it), so no command (BYE_ACK among them) reaches the fork, which then waits out its exit
// timeout and is halted before the JaCoCo agent's shutdown hook writes its exec file. This feeder reads the
// command stream byte by byte and blocks, as shared-utils 3.1.0's StreamFeeder (what surefire 2.22 was written
// against) did; surefire flushes the fork's stdin itself before it waits for the next command.
package org.apache.maven.surefire.shade.org.apache.maven.shared.utils.cli;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;

class StreamPollFeeder extends Thread {
  public static final int BUF_LEN = 80;
  private static final long JOIN_MILLIS = 5000;
  private final InputStream input;
  private final OutputStream output;
  private volatile Throwable exception;
  private volatile boolean done;

  StreamPollFeeder(InputStream input, OutputStream output) {
    this.input = input;
    this.output = output;
    setDaemon(true);  // a read that never returns must not keep Maven's JVM alive
  }

  @Override
  public void run() {
    try {
      if (input != null) {
        for (int data = input.read(); !done && data != -1; data = input.read()) {
          output.write(data);
          if (input.available() == 0) output.flush();
        }
      }
    } catch (Throwable e) {
      if (!done) exception = e;
    } finally {
      close();
    }
  }

  private void close() {
    try {
      output.close();
    } catch (IOException e) {
      if (exception == null && !done) exception = e;
    }
  }

  public Throwable getException() {
    return exception;
  }

  // After the process ended: closing the command stream ends a blocked read (surefire's streams return -1 once
  // closed); the join is bounded all the same.
  public void waitUntilDone() {
    done = true;
    try {
      if (input != null) input.close();
    } catch (IOException ignored) {
      // the stream is going away in any case
    }
    interrupt();
    try {
      join(JOIN_MILLIS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
