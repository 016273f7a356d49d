import { render } from 'preact';
import { App } from './app';
import { dropReloadParam } from './router';
import './style.css';

dropReloadParam();
render(<App />, document.getElementById('app')!);
